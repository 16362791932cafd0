-- %(ids)s is an array of job ids, or NULL for every failed job (of %(queue)s when given); the workers of
-- each queue with a retried job are woken.
WITH r AS (UPDATE {jobs} SET state = 'waiting', attempt = 0, crashes = 0, run_at = now(), finished_at = NULL,
    last_error = NULL, last_traceback = NULL
    WHERE state = 'failed' AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    RETURNING id, queue)
SELECT id FROM r CROSS JOIN
    (SELECT COUNT(pg_notify(%(channel)s, 'j ' || queue)) FROM (SELECT DISTINCT queue FROM r) q) n
