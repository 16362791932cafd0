SELECT queue, key, slot, holder, extract(epoch FROM busy_until)::float8 FROM {key_leases}
WHERE holder IS NOT NULL AND busy_until >= now() ORDER BY queue, key, slot
