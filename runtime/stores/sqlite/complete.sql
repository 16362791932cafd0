-- Settle only the claim we hold (token = claims); a job rescued and re-claimed elsewhere belongs
-- to its new holder; a cancelled job stays cancelled.
UPDATE corral_jobs SET state = 'done', result = ?, finished_at = ?, lease_until = NULL,
    worker_id = NULL WHERE id = ? AND claims = ? AND state NOT IN ('done', 'cancelled');
