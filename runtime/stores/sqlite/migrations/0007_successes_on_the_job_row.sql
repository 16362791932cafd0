-- A success is recorded by its job row alone: the row keeps the worker of its last attempt (done no
-- longer clears worker_id), and attempt_list.sql shows the done attempt from it. The trigger now records
-- every other attempt that ends (failed, retrying, cancelled; a rescue too), in the same transaction as
-- before, and a plain success writes one row, the job's. Done rows recorded before this migration stay:
-- attempt_list.sql shows those instead of one made from the job row.
-- The trigger is declared on last_error, not on state: SQLite codes a trigger into every UPDATE whose SET
-- list names its column, and evaluates its WHEN per row even when it never fires (~9 us of each
-- completion). Every statement that ends an attempt other than done sets last_error (cancel.sql sets it to
-- itself); tests/runtime/test_sqlite_store.py holds the store's statements to that.
DROP TRIGGER corral_attempts_record;
-- A retrying job has no finished_at: the attempt ended now (Unix seconds from SQLite's own clock).
CREATE TRIGGER corral_attempts_record AFTER UPDATE OF last_error ON corral_jobs
WHEN OLD.state = 'running' AND NEW.state NOT IN ('running', 'waiting', 'done')
BEGIN
    INSERT INTO corral_attempts (job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback,
        crashed)
    VALUES (NEW.id, NEW.attempt, NEW.state, OLD.worker_id, OLD.started_at,
        COALESCE(NEW.finished_at, (julianday('now') - 2440587.5) * 86400.0), NEW.last_error, NEW.last_traceback,
        NEW.crashes > OLD.crashes);
END
