-- A per_key queue's claim, last step: the chosen jobs (a JSON array of ids) move to running.
UPDATE corral_jobs SET state = 'running', attempt = attempt + 1, claims = claims + 1,
    worker_id = ?, started_at = ?, lease_until = ? + lease_seconds
WHERE id IN (SELECT value FROM json_each(?)) AND state IN ('waiting', 'retrying')
RETURNING id, kind, args, key, attempt, max_attempts, claims, enqueued_at, run_at, crashes, priority, retries;
