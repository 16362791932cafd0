-- A key's slot rows, made once: free slots keep their rows (holder and busy_until NULL).
INSERT INTO {key_leases} (queue, key, slot) SELECT %s, %s, s FROM generate_series(0, %s - 1) s
ON CONFLICT DO NOTHING
