-- A batch with a unique key among its jobs (insert.sql takes the others). Jobs whose offset is not positive
-- are runnable now: one notice per queue wakes its workers in every process once the inserting transaction
-- commits (NOTIFY is transactional). A row whose unique key another job holds (jobs_unique) is skipped,
-- and the store then reads its holder (unique_holders.sql).
-- The arrays are bound in binary (%b): psycopg's text form quotes each string through a regex, which made
-- dumping a batch of 1,000 jobs cost 4x as much as it does in binary.
WITH ins AS (INSERT INTO {jobs} (queue, kind, args, key, state, max_attempts, lease_seconds, run_at,
    event_id, priority, unique_key, unique_states)
    SELECT q, k, a::jsonb, ky, 'waiting', m, l, now() + d * interval '1 second', e, p, u, us
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::int[], %b::float8[], %b::float8[],
    %b::bigint[], %b::smallint[], %b::text[], %b::text[]) WITH ORDINALITY AS v(q, k, a, ky, m, l, d, e, p, u, us, n)
    ORDER BY n ON CONFLICT DO NOTHING
    RETURNING id, unique_key, queue, run_at <= now() AS ready)
SELECT id, unique_key FROM ins CROSS JOIN
    (SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM (SELECT DISTINCT queue FROM ins WHERE ready) r) n
