-- A job without a unique key (insert_unique_job.sql takes the others).
INSERT INTO corral_jobs (queue, kind, args, key, state, max_attempts, lease_seconds, run_at, enqueued_at, event_id,
    priority)
VALUES (?, ?, ?, ?, 'waiting', ?, ?, ?, ?, ?, ?);
