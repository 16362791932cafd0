-- The error text is protocol.rescue_error's.
UPDATE corral_jobs SET
    state = CASE WHEN attempt >= max_attempts THEN ? ELSE ? END,
    finished_at = CASE WHEN attempt >= max_attempts THEN ? ELSE NULL END,
    run_at = ?,
    last_error = 'lease expired: the worker ' || COALESCE(worker_id, '?') || ' was lost while running attempt ' || attempt,
    last_traceback = NULL,
    lease_until = NULL, worker_id = NULL
WHERE state = 'running' AND lease_until < ?;
