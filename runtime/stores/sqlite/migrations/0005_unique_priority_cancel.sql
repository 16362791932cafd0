-- Unique jobs, priorities and the cancelled state (a final state: free text here, nothing to change).
-- A job with a unique_key counts against it while its state is one of its unique_states
-- (',waiting,running,retrying,...,': a comma on each side of every state, so instr finds whole names):
-- the partial unique index refuses a second such job, under the write lock of the insert, in every
-- process. Claims take the highest priority first (0..3), then the oldest run_at.
ALTER TABLE corral_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE corral_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE corral_jobs ADD COLUMN unique_states TEXT;
DROP INDEX corral_jobs_runnable;
CREATE INDEX corral_jobs_runnable
    ON corral_jobs (queue, priority DESC, run_at, id) WHERE state IN ('waiting', 'retrying');
CREATE UNIQUE INDEX corral_jobs_unique
    ON corral_jobs (unique_key) WHERE unique_key IS NOT NULL AND instr(unique_states, ',' || state || ',') > 0
