-- Before a rescue: a lost worker that ran one job alone leaves that job the only suspect of the crash,
-- so its crash count grows (for the kinds given, a JSON array: those that run in the worker's own
-- process). A job lost beside others is not counted: nothing says which of them took the worker down.
UPDATE corral_jobs SET crashes = crashes + 1
WHERE state = 'running' AND lease_until < ? AND kind IN (SELECT value FROM json_each(?))
    AND NOT EXISTS (SELECT 1 FROM corral_jobs o
        WHERE o.state = 'running' AND o.worker_id = corral_jobs.worker_id AND o.id <> corral_jobs.id);
