WITH f AS (UPDATE {jobs} SET state = %s, run_at = now() + %s * interval '1 second',
    last_error = %s, last_traceback = %s, finished_at = CASE WHEN %s THEN now() END, crashes = crashes + %s,
    lease_until = NULL, worker_id = NULL WHERE id = %s AND claims = %s AND state = 'running' RETURNING id)
-- the count says whether this claim still held the job; a final failure notifies its waiters
SELECT COUNT(*), COUNT(CASE WHEN %s THEN pg_notify(%s, 'f ' || id) END) FROM f
