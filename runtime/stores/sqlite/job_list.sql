-- A filter that is NULL matches every job.
SELECT id, queue, kind, args, key, state, attempt, max_attempts, enqueued_at, run_at, started_at, finished_at,
    lease_until, worker_id, result, last_error, last_traceback, crashes
FROM corral_jobs
WHERE (:queue IS NULL OR queue = :queue) AND (:kind IS NULL OR kind = :kind) AND (:state IS NULL OR state = :state)
    AND (:since IS NULL OR enqueued_at >= :since) AND (:id IS NULL OR id = :id)
ORDER BY id DESC LIMIT :limit;
