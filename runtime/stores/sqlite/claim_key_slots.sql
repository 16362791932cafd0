-- The busy slots of a key, so the claim takes only free ones.
SELECT slot FROM corral_key_leases WHERE queue = ? AND key = ? AND busy_until >= ?;
