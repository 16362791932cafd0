INSERT INTO corral_periodic (kind, next_run) VALUES (?, ?);
