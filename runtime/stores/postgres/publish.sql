WITH e AS (INSERT INTO {events} (topic, payload) VALUES (%s, %s::jsonb) RETURNING id)
SELECT id, pg_notify(%s, 'e') FROM e
