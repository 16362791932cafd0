-- Before a rescue: a lost worker that ran one job alone leaves that job the only suspect of the crash,
-- so its crash count grows (for the kinds given: those that run in the worker's own process). A job
-- lost beside others is not counted: nothing says which of them took the worker down.
UPDATE {jobs} j SET crashes = j.crashes + 1
WHERE j.state = 'running' AND j.lease_until < now() AND j.kind = ANY(%s)
    AND NOT EXISTS (SELECT 1 FROM {jobs} o WHERE o.state = 'running' AND o.worker_id = j.worker_id AND o.id <> j.id)
