-- Jobs without a unique key (the plain path: enqueue, the relay, periodic jobs; insert_unique.sql takes a
-- batch with one). Jobs whose offset is not positive are runnable now: one notice per queue wakes its
-- workers in every process once the inserting transaction commits (NOTIFY is transactional). A relayed
-- event's job made before is skipped (jobs_event, the one index a row without a unique key can conflict on:
-- naming it spares the other unique indexes' checks).
-- The arrays are bound in binary (%b): psycopg's text form quotes each string through a regex, which made
-- dumping a batch of 1,000 jobs cost 4x as much as it does in binary.
WITH ins AS (INSERT INTO {jobs} (queue, kind, args, key, state, max_attempts, lease_seconds, run_at,
    event_id, priority)
    SELECT q, k, a::jsonb, ky, 'waiting', m, l, now() + d * interval '1 second', e, p
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::int[], %b::float8[], %b::float8[],
    %b::bigint[], %b::smallint[]) WITH ORDINALITY AS v(q, k, a, ky, m, l, d, e, p, n)
    ORDER BY n ON CONFLICT (event_id, kind) WHERE event_id IS NOT NULL DO NOTHING
    RETURNING id, queue, run_at <= now() AS ready)
SELECT id FROM ins CROSS JOIN
    (SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM (SELECT DISTINCT queue FROM ins WHERE ready) r) n
