-- One migrator at a time per schema and prefix, in every process and host (the key is the channel).
SELECT pg_advisory_xact_lock(hashtext(%s))
