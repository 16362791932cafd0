SELECT queue, state, COUNT(*) FROM corral_jobs GROUP BY queue, state;
