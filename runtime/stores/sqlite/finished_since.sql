-- Every attempt that ended since then: those recorded, and the successes of the job rows (the trigger
-- records none since migration 7) but for jobs whose done row was recorded before that migration.
SELECT queue, outcome, finished_at FROM (
    SELECT j.queue, a.outcome, a.finished_at FROM corral_attempts a JOIN corral_jobs j ON j.id = a.job_id
    WHERE a.finished_at >= :since
    UNION ALL
    SELECT j.queue, 'done', j.finished_at FROM corral_jobs j
    WHERE j.state = 'done' AND j.finished_at >= :since
        AND NOT EXISTS (SELECT 1 FROM corral_attempts a WHERE a.job_id = j.id AND a.outcome = 'done')
)
ORDER BY finished_at;
