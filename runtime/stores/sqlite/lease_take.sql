-- Take one slot of a key: a new row, or a row whose lease expired or that this holder renews.
INSERT INTO corral_key_leases (queue, key, slot, holder, busy_until) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue, key, slot) DO UPDATE SET holder = excluded.holder, busy_until = excluded.busy_until
WHERE corral_key_leases.busy_until < ? OR corral_key_leases.holder = excluded.holder;
