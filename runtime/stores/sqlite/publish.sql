INSERT INTO corral_events (topic, payload, created_at) VALUES (?, ?, ?);
