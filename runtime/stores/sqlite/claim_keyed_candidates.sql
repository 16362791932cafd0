-- A per_key queue's claim, first step: the runnable jobs in claim order, past every job whose key has
-- no free slot (a slot is busy while its busy_until is in the future). Runs inside BEGIN IMMEDIATE.
SELECT id, key, lease_seconds, claims FROM corral_jobs j
WHERE queue = ? AND state IN ('waiting', 'retrying') AND run_at <= ?
    AND (key IS NULL OR (SELECT COUNT(*) FROM corral_key_leases l
        WHERE l.queue = j.queue AND l.key = j.key AND l.busy_until >= ?) < ?)
ORDER BY priority DESC, run_at, id LIMIT ?;
