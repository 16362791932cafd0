-- insert.sql for one job, its values as scalars: a single enqueue sends no arrays (dumping one-element
-- lists cost a third of the client's time per enqueue) and the server unnests nothing.
-- The same columns, conflict target and notice as insert.sql: keep the two alike.
WITH ins AS (INSERT INTO {jobs} (queue, kind, args, key, state, max_attempts, lease_seconds, run_at,
    event_id, priority)
    VALUES (%s::text, %s::text, %s::jsonb, %s::text, 'waiting', %s::int, %s::float8,
    now() + %s::float8 * interval '1 second', %s::bigint, %s::smallint)
    ON CONFLICT (event_id, kind) WHERE event_id IS NOT NULL DO NOTHING
    RETURNING id, queue, run_at <= now() AS ready)
SELECT id FROM ins CROSS JOIN (SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM ins WHERE ready) n
