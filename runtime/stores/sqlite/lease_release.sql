DELETE FROM corral_key_leases WHERE queue = ? AND key = ? AND holder = ?;
