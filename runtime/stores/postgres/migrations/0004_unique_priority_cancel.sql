-- Unique jobs, priorities and the cancelled state. A job with a unique_key counts against it while its
-- state is one of its unique_states (',waiting,running,retrying,...,': a comma on each side of every
-- state, so strpos finds whole names): the partial unique index refuses a second such job, in every
-- process and transaction. Claims take the highest priority first (0..3), then the oldest run_at: the
-- claim index follows. 'cancelled' is a final state.
ALTER TABLE {jobs} ADD COLUMN priority smallint NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 3),
    ADD COLUMN unique_key text, ADD COLUMN unique_states text;
DROP INDEX {qualified_jobs_runnable};
CREATE INDEX {jobs_runnable} ON {jobs} (queue, priority DESC, run_at, id) WHERE state IN ('waiting', 'retrying');
CREATE UNIQUE INDEX {jobs_unique} ON {jobs} (unique_key)
    WHERE unique_key IS NOT NULL AND strpos(unique_states, ',' || state || ',') > 0;
ALTER TABLE {jobs} DROP CONSTRAINT {jobs_state_check}, ADD CONSTRAINT {jobs_state_check}
    CHECK (state IN ('waiting', 'running', 'retrying', 'failed', 'done', 'cancelled'))
