-- A filter that is NULL matches every job.
SELECT id, queue, kind, args::text, key, state, attempt, max_attempts, extract(epoch FROM enqueued_at)::float8,
    extract(epoch FROM run_at)::float8, extract(epoch FROM started_at)::float8,
    extract(epoch FROM finished_at)::float8, extract(epoch FROM lease_until)::float8, worker_id, result::text,
    last_error, last_traceback, crashes
FROM {jobs}
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s) AND (%(kind)s::text IS NULL OR kind = %(kind)s)
    AND (%(state)s::text IS NULL OR state = %(state)s)
    AND (%(since)s::float8 IS NULL OR enqueued_at >= to_timestamp(%(since)s))
    AND (%(id)s::bigint IS NULL OR id = %(id)s)
ORDER BY id DESC LIMIT %(limit)s
