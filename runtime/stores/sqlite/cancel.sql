-- Cancel the given jobs (a JSON array of ids) that are not final yet; a running one keeps its worker_id,
-- so whoever reads the row sees where it was running when it was cancelled. The error an earlier attempt
-- left is cleared: it is not the cancelled attempt's (the attempts trigger, declared on last_error, records a
-- running one's attempt from this row), and the attempts history keeps it.
UPDATE corral_jobs SET state = 'cancelled', finished_at = ?, lease_until = NULL, last_error = NULL,
    last_traceback = NULL
WHERE id IN (SELECT value FROM json_each(?)) AND state IN ('waiting', 'retrying', 'running')
RETURNING id;
