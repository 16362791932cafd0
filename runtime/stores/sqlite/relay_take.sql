SELECT id, topic, payload FROM corral_events ORDER BY id LIMIT ?;
