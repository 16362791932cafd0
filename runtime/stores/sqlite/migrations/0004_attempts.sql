-- Every attempt's outcome, for `corral jobs show` and the dashboard: a row when a running job's attempt
-- ends (done, failed, retrying; a rescue too), written by a trigger so every path that settles a job,
-- today's and tomorrow's, records it in the same transaction. Release and snooze (running -> waiting)
-- refund the attempt and record nothing. Rows go with their job (pruned or purged). The id is a plain rowid
-- (no AUTOINCREMENT, which costs a write per insert): a new row's id is above every row left, so the rows of
-- a job still read in the order they were written.
CREATE TABLE corral_attempts (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    worker_id TEXT,
    started_at REAL,
    finished_at REAL NOT NULL,
    error TEXT,
    traceback TEXT,
    crashed INTEGER NOT NULL
);
CREATE INDEX corral_attempts_job ON corral_attempts (job_id, id);
CREATE INDEX corral_attempts_finished ON corral_attempts (finished_at);
-- A retrying job has no finished_at: the attempt ended now (Unix seconds from SQLite's own clock).
CREATE TRIGGER corral_attempts_record AFTER UPDATE OF state ON corral_jobs
WHEN OLD.state = 'running' AND NEW.state NOT IN ('running', 'waiting')
BEGIN
    INSERT INTO corral_attempts (job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback,
        crashed)
    VALUES (NEW.id, NEW.attempt, NEW.state, OLD.worker_id, OLD.started_at,
        COALESCE(NEW.finished_at, (julianday('now') - 2440587.5) * 86400.0),
        CASE WHEN NEW.state <> 'done' THEN NEW.last_error END,
        CASE WHEN NEW.state <> 'done' THEN NEW.last_traceback END,
        NEW.crashes > OLD.crashes);
END;
CREATE TRIGGER corral_attempts_forget AFTER DELETE ON corral_jobs
BEGIN
    DELETE FROM corral_attempts WHERE job_id = OLD.id;
END
