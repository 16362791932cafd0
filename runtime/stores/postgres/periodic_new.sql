INSERT INTO {periodic} (kind, next_run) VALUES (%s, now() + %s * interval '1 second')
ON CONFLICT DO NOTHING RETURNING kind
