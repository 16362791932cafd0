UPDATE {key_leases} SET holder = %s, busy_until = now() + %s * interval '1 second'
WHERE (queue, key, slot) = (SELECT queue, key, slot FROM {key_leases}
    WHERE queue = %s AND key = %s AND slot < %s AND (busy_until IS NULL OR busy_until < now() OR holder = %s)
    ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING slot
