-- The recorded attempts, then the done one from the job row (the trigger records no success since
-- migration 7), unless a done row recorded before that migration is there already.
SELECT job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, crashed
FROM (
    SELECT job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, crashed, id AS seq
    FROM corral_attempts WHERE job_id = :id
    UNION ALL
    SELECT id, attempt, 'done', worker_id, started_at, finished_at, NULL, NULL, 0, NULL
    FROM corral_jobs j WHERE id = :id AND state = 'done'
        AND NOT EXISTS (SELECT 1 FROM corral_attempts a WHERE a.job_id = j.id AND a.outcome = 'done')
)
ORDER BY seq IS NULL, seq;
