-- The error text is protocol.rescue_error's. Each rescued job is due at its own random moment within
-- one lease (protocol.rescue_spread): jobs lost together do not form the same batch again.
UPDATE corral_jobs SET
    state = CASE WHEN attempt >= max_attempts THEN ? ELSE ? END,
    finished_at = CASE WHEN attempt >= max_attempts THEN ? ELSE NULL END,
    run_at = ? + lease_seconds * (abs(random() % 1000000) / 1000000.0),
    last_error = 'lease expired: the worker ' || COALESCE(worker_id, '?') || ' was lost while running attempt ' || attempt,
    last_traceback = NULL,
    lease_until = NULL, worker_id = NULL
WHERE state = 'running' AND lease_until < ?;
