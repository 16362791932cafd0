-- How often a job's attempts crashed their worker process (isolation="process"); the executor fails
-- a job for good once it reaches the runtime's max_crashes.
ALTER TABLE {jobs} ADD COLUMN crashes integer NOT NULL DEFAULT 0
