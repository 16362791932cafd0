SELECT j.queue, a.outcome, a.finished_at FROM corral_attempts a JOIN corral_jobs j ON j.id = a.job_id
WHERE a.finished_at >= ? ORDER BY a.finished_at;
