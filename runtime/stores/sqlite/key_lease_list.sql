SELECT queue, key, slot, holder, busy_until FROM corral_key_leases
WHERE holder IS NOT NULL AND busy_until >= ? ORDER BY queue, key, slot;
