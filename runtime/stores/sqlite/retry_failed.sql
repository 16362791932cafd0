-- :ids is a JSON array of job ids, or NULL for every failed job (of :queue when given). A unique job is
-- retried only while no other job holds its key (in that job's unique states), and of several failed jobs
-- sharing a key only the oldest: waiting again, it holds the key, and the unique index allows one holder.
WITH candidates AS (
    SELECT id, unique_key FROM corral_jobs
    WHERE state = 'failed' AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
        AND (:queue IS NULL OR queue = :queue)
)
UPDATE corral_jobs SET state = 'waiting', attempt = 0, crashes = 0, retries = 0, run_at = :now, finished_at = NULL,
    last_error = NULL, last_traceback = NULL
WHERE state = 'failed' AND id IN (
    SELECT id FROM candidates WHERE unique_key IS NULL
    UNION ALL
    SELECT MIN(c.id) FROM candidates c
    WHERE c.unique_key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM corral_jobs o WHERE o.unique_key = c.unique_key AND o.id <> c.id
            AND instr(o.unique_states, ',' || o.state || ',') > 0)
    GROUP BY c.unique_key)
RETURNING id;
