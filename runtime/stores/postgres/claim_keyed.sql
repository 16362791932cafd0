-- A per_key queue's claim: up to the limit of jobs, each keyed one together with a free slot of its key,
-- in one statement. Candidates skip every job whose key has no free slot (a slot is busy while its
-- busy_until is in the future); of them, the chosen jobs (at most as many of a key as it has free
-- slots, each with its own slot) are locked SKIP LOCKED, like the plain claim's. Their slots are then
-- taken by an upsert that re-checks the slot is free: a claimer taking the same slot at the same time
-- makes it wait, and the loser takes nothing (rows in key and slot order: no two claimers deadlock). A
-- job whose slot was not taken stays waiting: the claim never takes a job without its slot. A slot's
-- holder is the attempt the claim starts (protocol.attempt_holder: id * span + the claim count after it).
WITH full_keys AS MATERIALIZED (
    SELECT l.key FROM {key_leases} l WHERE l.queue = %(queue)s AND l.busy_until >= now()
    GROUP BY l.key HAVING count(*) >= %(per_key)s
), candidates AS MATERIALIZED (
    SELECT j.id, j.key, j.lease_seconds, j.run_at, j.claims, j.priority,
        row_number() OVER (PARTITION BY j.key ORDER BY j.priority DESC, j.run_at, j.id) AS n
    FROM (SELECT id, key, lease_seconds, run_at, claims, priority FROM {jobs}
        WHERE queue = %(queue)s AND state IN ('waiting', 'retrying') AND run_at <= now()
            AND (key IS NULL OR key NOT IN (SELECT f.key FROM full_keys f))
        ORDER BY priority DESC, run_at, id LIMIT %(scan)s) j
), free AS MATERIALIZED (
    SELECT k.key, s.slot, row_number() OVER (PARTITION BY k.key ORDER BY s.slot) AS n
    FROM (SELECT DISTINCT key FROM candidates WHERE key IS NOT NULL) k
        CROSS JOIN generate_series(0, %(per_key)s - 1) AS s(slot)
    WHERE NOT EXISTS (SELECT FROM {key_leases} l
        WHERE l.queue = %(queue)s AND l.key = k.key AND l.slot = s.slot AND l.busy_until >= now())
), chosen AS MATERIALIZED (
    SELECT c.id, c.key, c.lease_seconds, c.claims, f.slot FROM candidates c LEFT JOIN free f ON f.key = c.key AND f.n = c.n
    WHERE c.key IS NULL OR f.slot IS NOT NULL
    ORDER BY c.priority DESC, c.run_at, c.id LIMIT %(limit)s
), locked AS MATERIALIZED (
    SELECT c.* FROM chosen c WHERE c.id IN (SELECT j.id FROM {jobs} j
        WHERE j.id IN (SELECT id FROM chosen) AND j.state IN ('waiting', 'retrying') FOR UPDATE SKIP LOCKED)
), leased AS (
    INSERT INTO {key_leases} AS l (queue, key, slot, holder, busy_until)
    SELECT %(queue)s, c.key, c.slot, c.id * %(span)s + (c.claims + 1) %% %(span)s,
        now() + c.lease_seconds * interval '1 second'
    FROM locked c WHERE c.key IS NOT NULL ORDER BY c.key, c.slot
    ON CONFLICT (queue, key, slot) DO UPDATE SET holder = excluded.holder, busy_until = excluded.busy_until
    WHERE l.busy_until IS NULL OR l.busy_until < now()
    RETURNING l.holder
)
UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, claims = j.claims + 1, worker_id = %(worker)s,
    started_at = now(), lease_until = now() + j.lease_seconds * interval '1 second'
FROM locked c
WHERE j.id = c.id AND (c.key IS NULL OR j.id IN (SELECT holder / %(span)s FROM leased))
RETURNING j.id, j.kind, j.args::text, j.key, j.attempt, j.max_attempts, j.claims,
    extract(epoch FROM j.enqueued_at)::float8, extract(epoch FROM j.run_at)::float8, j.crashes, j.priority, j.retries
