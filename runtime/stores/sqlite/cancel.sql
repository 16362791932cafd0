-- Cancel the given jobs (a JSON array of ids) that are not final yet; a running one keeps its worker_id,
-- so whoever reads the row sees where it was running when it was cancelled. last_error is set (to itself)
-- so that the attempts trigger, declared on that column, records a running one's attempt.
UPDATE corral_jobs SET state = 'cancelled', finished_at = ?, lease_until = NULL, last_error = last_error
WHERE id IN (SELECT value FROM json_each(?)) AND state IN ('waiting', 'retrying', 'running')
RETURNING id;
