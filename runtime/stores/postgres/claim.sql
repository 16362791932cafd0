-- A plain queue's claim: up to {limit} runnable jobs, highest priority first, then the oldest, skipping rows
-- another claimer holds. {limit} is a literal the store composes in per claim size (_PER_LIMIT in store.py).
UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, claims = j.claims + 1, worker_id = %s,
    started_at = now(), lease_until = now() + j.lease_seconds * interval '1 second'
FROM (SELECT id FROM {jobs} WHERE queue = %s AND state IN ('waiting', 'retrying') AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED) c
WHERE j.id = c.id
RETURNING j.id, j.kind, j.args::text, j.key, j.attempt, j.max_attempts, j.claims,
    extract(epoch FROM j.enqueued_at)::float8, extract(epoch FROM j.run_at)::float8, j.crashes, j.priority, j.retries
