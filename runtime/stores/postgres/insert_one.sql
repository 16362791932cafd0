-- insert.sql for one job, its values as scalars: a single enqueue sends no arrays (dumping eleven
-- one-element lists cost a third of the client's time per enqueue) and the server unnests nothing.
-- The same columns, conflicts and notice as insert.sql: keep the two alike.
WITH ins AS (INSERT INTO {jobs} (queue, kind, args, key, state, max_attempts, lease_seconds, run_at,
    event_id, priority, unique_key, unique_states)
    VALUES (%s::text, %s::text, %s::jsonb, %s::text, 'waiting', %s::int, %s::float8,
    now() + %s::float8 * interval '1 second', %s::bigint, %s::smallint, %s::text, %s::text)
    ON CONFLICT DO NOTHING
    RETURNING id, unique_key, queue, run_at <= now() AS ready)
SELECT id, unique_key FROM ins CROSS JOIN (SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM ins WHERE ready) n
