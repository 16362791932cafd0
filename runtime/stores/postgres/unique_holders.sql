-- The jobs that hold unique keys: per key, the one job with it whose state is among its unique_states.
SELECT unique_key, id FROM {jobs}
WHERE unique_key = ANY(%s::text[]) AND strpos(unique_states, ',' || state || ',') > 0
