-- The error text is protocol.rescue_error's. Each rescued job is due at its own random moment within
-- one lease (protocol.rescue_spread): jobs lost together do not form the same batch again.
UPDATE {jobs} SET state = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'retrying' END,
    finished_at = CASE WHEN attempt >= max_attempts THEN now() END, run_at = now() + lease_seconds * random() * interval '1 second',
    last_error = 'lease expired: the worker ' || COALESCE(worker_id, '?') || ' was lost while running attempt ' || attempt,
    last_traceback = NULL, lease_until = NULL, worker_id = NULL
WHERE state = 'running' AND lease_until < now() RETURNING id, queue, state
