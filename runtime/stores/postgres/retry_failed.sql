-- %(ids)s is an array of job ids, or NULL for every failed job (of %(queue)s when given); the workers of
-- each queue with a retried job are woken. A unique job is retried only while no other job holds its key
-- (in that job's unique states), and of several failed jobs sharing a key only the oldest: waiting again,
-- it holds the key, and the unique index allows one holder.
WITH candidates AS (
    SELECT id, unique_key FROM {jobs}
    WHERE state = 'failed' AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
), chosen AS (
    SELECT id FROM candidates WHERE unique_key IS NULL
    UNION ALL
    SELECT MIN(c.id) FROM candidates c
    WHERE c.unique_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {jobs} o WHERE o.unique_key = c.unique_key AND o.id <> c.id
            AND strpos(o.unique_states, ',' || o.state || ',') > 0)
    GROUP BY c.unique_key
), r AS (UPDATE {jobs} SET state = 'waiting', attempt = 0, crashes = 0, retries = 0, run_at = now(), finished_at = NULL,
    last_error = NULL, last_traceback = NULL
    WHERE state = 'failed' AND id IN (SELECT id FROM chosen)
    RETURNING id, queue)
SELECT id FROM r CROSS JOIN
    (SELECT COUNT(pg_notify(%(channel)s, 'j ' || queue)) FROM (SELECT DISTINCT queue FROM r) q) n
