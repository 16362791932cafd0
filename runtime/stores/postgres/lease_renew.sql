-- The attempt holding a key slot extends it while its code still runs (even once the attempt is recorded).
UPDATE {key_leases} SET busy_until = now() + %s * interval '1 second' WHERE queue = %s AND key = %s AND holder = %s
