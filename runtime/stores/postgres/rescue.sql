-- The error text is protocol.rescue_error's.
UPDATE {jobs} SET state = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'retrying' END,
    finished_at = CASE WHEN attempt >= max_attempts THEN now() END, run_at = now(),
    last_error = 'lease expired: the worker ' || COALESCE(worker_id, '?') || ' was lost while running attempt ' || attempt,
    last_traceback = NULL, lease_until = NULL, worker_id = NULL
WHERE state = 'running' AND lease_until < now() RETURNING id, queue, state
