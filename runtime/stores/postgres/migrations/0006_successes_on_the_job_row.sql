-- A success is recorded by its job row alone: the row keeps the worker of its last attempt (done no
-- longer clears worker_id), and attempt_list.sql shows the done attempt from it. The trigger now records
-- every other attempt that ends (failed, retrying, cancelled; a rescue too), in the same transaction as
-- before, and a plain success writes one row, the job's. Done rows recorded before this migration stay:
-- attempt_list.sql shows those instead of one made from the job row.
CREATE OR REPLACE FUNCTION {record_attempt}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {attempts} (job_id, attempt, outcome, worker_id, started_at, error, traceback, crashed)
    VALUES (NEW.id, NEW.attempt, NEW.state, OLD.worker_id, OLD.started_at, NEW.last_error, NEW.last_traceback,
        NEW.crashes > OLD.crashes);
    RETURN NULL;
END
$$;
DROP TRIGGER {attempts_record} ON {jobs};
CREATE TRIGGER {attempts_record} AFTER UPDATE OF state ON {jobs} FOR EACH ROW
    WHEN (OLD.state = 'running' AND NEW.state NOT IN ('running', 'waiting', 'done'))
    EXECUTE FUNCTION {record_attempt}()
