SELECT job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, crashed
FROM corral_attempts WHERE job_id = ? ORDER BY id;
