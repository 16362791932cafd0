-- The id of the last job this connection inserted (no trigger inserts into corral_jobs).
SELECT last_insert_rowid();
