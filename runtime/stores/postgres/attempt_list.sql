-- The recorded attempts, then the done one from the job row (the trigger records no success since
-- migration 6), unless a done row recorded before that migration is there already.
SELECT job_id, attempt, outcome, worker_id, extract(epoch FROM started_at)::float8,
    extract(epoch FROM finished_at)::float8, error, traceback, crashed
FROM (
    SELECT job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, crashed, id AS seq
    FROM {attempts} WHERE job_id = %(id)s
    UNION ALL
    SELECT id, attempt, 'done', worker_id, started_at, finished_at, NULL, NULL, false, NULL
    FROM {jobs} j WHERE id = %(id)s AND state = 'done'
        AND NOT EXISTS (SELECT FROM {attempts} a WHERE a.job_id = j.id AND a.outcome = 'done')
) ended
ORDER BY seq NULLS LAST
