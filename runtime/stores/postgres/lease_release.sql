UPDATE {key_leases} SET holder = NULL, busy_until = NULL WHERE queue = %s AND key = %s AND holder = %s
