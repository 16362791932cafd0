UPDATE corral_jobs SET state = 'running', attempt = attempt + 1, claims = claims + 1,
    worker_id = ?, started_at = ?, lease_until = ? + lease_seconds
WHERE id IN (SELECT id FROM corral_jobs WHERE queue = ? AND state IN ('waiting', 'retrying')
    AND run_at <= ? ORDER BY priority DESC, run_at, id LIMIT ?)
RETURNING id, kind, args, key, attempt, max_attempts, claims, enqueued_at, run_at, crashes, priority, retries;
