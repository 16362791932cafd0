-- A per_key queue's claim: up to the limit of jobs, each keyed one together with a free slot of its key,
-- in one statement. Candidates skip every job whose key has no free slot (a slot is busy while its
-- busy_until is in the future) and are locked SKIP LOCKED, like the plain claim's; free slot rows are
-- locked SKIP LOCKED too (a slot another claimer is taking is not free), and a slot without a row is
-- inserted, ON CONFLICT DO NOTHING (a claimer that inserted it first wins). A job whose slot was not
-- taken stays waiting: the claim never takes a job without its slot.
WITH candidates AS MATERIALIZED (
    SELECT j.id, j.key, j.lease_seconds, j.run_at FROM {jobs} j
    WHERE j.queue = %(queue)s AND j.state IN ('waiting', 'retrying') AND j.run_at <= now()
        AND (j.key IS NULL OR (SELECT count(*) FROM {key_leases} l
            WHERE l.queue = j.queue AND l.key = j.key AND l.busy_until >= now()) < %(per_key)s)
    ORDER BY j.run_at, j.id LIMIT %(scan)s FOR UPDATE OF j SKIP LOCKED
), free_rows AS MATERIALIZED (
    SELECT l.key, l.slot FROM {key_leases} l
    WHERE l.queue = %(queue)s AND l.key IN (SELECT c.key FROM candidates c) AND l.slot < %(per_key)s
        AND (l.busy_until IS NULL OR l.busy_until < now())
    FOR UPDATE SKIP LOCKED
), free AS MATERIALIZED (
    SELECT f.key, f.slot, f.has_row, row_number() OVER (PARTITION BY f.key ORDER BY f.slot) AS n FROM (
        SELECT r.key, r.slot, true AS has_row FROM free_rows r
        UNION ALL
        SELECT k.key, s.slot, false FROM (SELECT DISTINCT c.key FROM candidates c WHERE c.key IS NOT NULL) k
            CROSS JOIN generate_series(0, %(per_key)s - 1) AS s(slot)
        WHERE NOT EXISTS (SELECT FROM {key_leases} l WHERE l.queue = %(queue)s AND l.key = k.key AND l.slot = s.slot)
    ) f
), chosen AS MATERIALIZED (
    SELECT r.id, r.key, r.lease_seconds, f.slot, f.has_row FROM (
        SELECT c.*, row_number() OVER (PARTITION BY c.key ORDER BY c.run_at, c.id) AS n FROM candidates c
    ) r LEFT JOIN free f ON f.key = r.key AND f.n = r.n
    WHERE r.key IS NULL OR f.slot IS NOT NULL
    ORDER BY r.run_at, r.id LIMIT %(limit)s
), leased AS (
    UPDATE {key_leases} l SET holder = c.id, busy_until = now() + c.lease_seconds * interval '1 second'
    FROM chosen c WHERE c.has_row AND l.queue = %(queue)s AND l.key = c.key AND l.slot = c.slot
    RETURNING l.holder
), inserted AS (
    INSERT INTO {key_leases} (queue, key, slot, holder, busy_until)
    SELECT %(queue)s, c.key, c.slot, c.id, now() + c.lease_seconds * interval '1 second'
    FROM chosen c WHERE NOT c.has_row ORDER BY c.key, c.slot
    ON CONFLICT DO NOTHING RETURNING holder
)
UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, claims = j.claims + 1, worker_id = %(worker)s,
    started_at = now(), lease_until = now() + j.lease_seconds * interval '1 second'
FROM chosen c
WHERE j.id = c.id AND (c.key IS NULL OR j.id IN (SELECT holder FROM leased UNION ALL SELECT holder FROM inserted))
RETURNING j.id, j.kind, j.args::text, j.key, j.attempt, j.max_attempts, j.claims,
    extract(epoch FROM j.enqueued_at)::float8, extract(epoch FROM j.run_at)::float8
