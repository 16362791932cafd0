UPDATE corral_jobs SET state = ?, run_at = ?, last_error = ?, last_traceback = ?,
    finished_at = ?, crashes = crashes + ?, lease_until = NULL, worker_id = NULL
WHERE id = ? AND claims = ? AND state = 'running';
