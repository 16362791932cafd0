-- A job whose unique_key is already held (corral_jobs_unique) is not inserted: the store then reads
-- the holder's id (unique_holder) under the same write lock.
INSERT INTO corral_jobs (queue, kind, args, key, state, max_attempts, lease_seconds, run_at, enqueued_at, event_id,
    priority, unique_key, unique_states)
VALUES (?, ?, ?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING;
