-- Settle only the claim we hold (token = claims); a job rescued and re-claimed elsewhere belongs
-- to its new holder; a cancelled job stays cancelled. worker_id stays: the done row is the record of its
-- last attempt (attempt_list.sql), which the attempts trigger does not write for a success.
UPDATE corral_jobs SET state = 'done', result = ?, finished_at = ?, lease_until = NULL
WHERE id = ? AND claims = ? AND state NOT IN ('done', 'cancelled');
