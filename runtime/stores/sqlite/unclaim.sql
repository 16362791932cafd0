-- Snooze and release: refund the attempt spent by the claim, the job never got to run to an outcome.
-- A snooze the job asked for (raise Retry) counts in retries.
UPDATE corral_jobs SET state = 'waiting', attempt = MAX(attempt - 1, 0), run_at = ?, retries = retries + ?,
    lease_until = NULL, worker_id = NULL WHERE id = ? AND claims = ? AND state = 'running';
