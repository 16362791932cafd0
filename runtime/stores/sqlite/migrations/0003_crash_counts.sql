-- How often a job's attempts crashed their worker process (isolation="process"); the executor fails
-- a job for good once it reaches the runtime's max_crashes.
ALTER TABLE corral_jobs ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0
