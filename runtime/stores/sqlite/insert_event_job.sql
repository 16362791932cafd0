-- The relay's insert: a job already made from this event for this kind (corral_jobs_event) is kept.
INSERT OR IGNORE INTO corral_jobs (queue, kind, args, key, state, max_attempts, lease_seconds, run_at, enqueued_at,
    event_id)
VALUES (?, ?, ?, ?, 'waiting', ?, ?, ?, ?, ?);
