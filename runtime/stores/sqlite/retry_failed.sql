-- :ids is a JSON array of job ids, or NULL for every failed job (of :queue when given).
UPDATE corral_jobs SET state = 'waiting', attempt = 0, crashes = 0, run_at = :now, finished_at = NULL,
    last_error = NULL, last_traceback = NULL
WHERE state = 'failed' AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
    AND (:queue IS NULL OR queue = :queue)
RETURNING id;
