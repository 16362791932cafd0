SELECT id, queue, kind, args::text, attempt, max_attempts, last_error, last_traceback,
    extract(epoch FROM finished_at)::float8 FROM {jobs} WHERE state = 'failed'
ORDER BY finished_at DESC, id DESC LIMIT %s
