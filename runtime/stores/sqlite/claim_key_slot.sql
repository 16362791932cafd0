-- Take a free slot for a job being claimed (the write lock is held: nobody else can take it meanwhile).
INSERT INTO corral_key_leases (queue, key, slot, holder, busy_until) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue, key, slot) DO UPDATE SET holder = excluded.holder, busy_until = excluded.busy_until;
