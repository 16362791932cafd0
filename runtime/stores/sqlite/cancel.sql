-- Cancel the given jobs (a JSON array of ids) that are not final yet; a running one keeps its worker_id,
-- so whoever reads the row sees where it was running when it was cancelled.
UPDATE corral_jobs SET state = 'cancelled', finished_at = ?, lease_until = NULL
WHERE id IN (SELECT value FROM json_each(?)) AND state IN ('waiting', 'retrying', 'running')
RETURNING id;
