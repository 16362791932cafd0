-- Snooze and release: refund the attempt spent by the claim, the job never got to run to an
-- outcome (a snooze the job asked for, raise Retry, counts in retries). A job put back at once
-- (released at shutdown) is announced so another process takes it now.
WITH u AS (UPDATE {jobs} SET state = 'waiting', attempt = GREATEST(attempt - 1, 0),
    run_at = now() + %s * interval '1 second', retries = retries + %s, lease_until = NULL, worker_id = NULL
    WHERE id = %s AND claims = %s AND state = 'running' RETURNING queue)
SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM u WHERE %s
