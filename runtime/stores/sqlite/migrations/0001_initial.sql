-- The schema as the SQLite store first shipped it (before versions were recorded): a database
-- that has these tables and no version row is at version 1.
CREATE TABLE corral_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    args TEXT NOT NULL,
    key TEXT,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    claims INTEGER NOT NULL DEFAULT 0,
    lease_seconds REAL NOT NULL,
    run_at REAL NOT NULL,
    enqueued_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    lease_until REAL,
    worker_id TEXT,
    result TEXT,
    last_error TEXT,
    last_traceback TEXT,
    event_id INTEGER
);
CREATE INDEX corral_jobs_runnable
    ON corral_jobs (queue, run_at, id) WHERE state IN ('waiting', 'retrying');
CREATE INDEX corral_jobs_leased
    ON corral_jobs (lease_until) WHERE state = 'running';
CREATE INDEX corral_jobs_failed
    ON corral_jobs (finished_at) WHERE state = 'failed';
CREATE UNIQUE INDEX corral_jobs_event
    ON corral_jobs (event_id, kind) WHERE event_id IS NOT NULL;
CREATE TABLE corral_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE corral_key_leases (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    slot INTEGER NOT NULL,
    holder INTEGER NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (queue, key, slot)
);
CREATE TABLE corral_periodic (
    kind TEXT PRIMARY KEY,
    next_run REAL NOT NULL
);
