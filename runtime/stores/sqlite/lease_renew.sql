-- The attempt holding a key slot extends it while its code still runs (even once the attempt is recorded).
UPDATE corral_key_leases SET busy_until = ? WHERE queue = ? AND key = ? AND holder = ?;
