-- How often a job asked to run later (raise Retry); the executor fails a job for good once it
-- reaches the runtime's max_retries_requested.
ALTER TABLE {jobs} ADD COLUMN retries integer NOT NULL DEFAULT 0
