SELECT job_id, attempt, outcome, worker_id, extract(epoch FROM started_at)::float8,
    extract(epoch FROM finished_at)::float8, error, traceback, crashed
FROM {attempts} WHERE job_id = %s ORDER BY id
