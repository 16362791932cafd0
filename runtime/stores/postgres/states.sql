SELECT id, queue, state, result::text, last_error FROM {jobs} WHERE id = ANY(%s::bigint[])
