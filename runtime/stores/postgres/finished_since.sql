-- Every attempt that ended since then: those recorded, and the successes of the job rows (the trigger
-- records none since migration 6) but for jobs whose done row was recorded before that migration.
SELECT queue, outcome, extract(epoch FROM finished_at)::float8 FROM (
    SELECT j.queue, a.outcome, a.finished_at FROM {attempts} a JOIN {jobs} j ON j.id = a.job_id
    WHERE a.finished_at >= to_timestamp(%(since)s)
    UNION ALL
    SELECT j.queue, 'done', j.finished_at FROM {jobs} j
    WHERE j.state = 'done' AND j.finished_at >= to_timestamp(%(since)s)
        AND NOT EXISTS (SELECT FROM {attempts} a WHERE a.job_id = j.id AND a.outcome = 'done')
) ended
ORDER BY finished_at
