SELECT j.queue, a.outcome, extract(epoch FROM a.finished_at)::float8
FROM {attempts} a JOIN {jobs} j ON j.id = a.job_id
WHERE a.finished_at >= to_timestamp(%s) ORDER BY a.finished_at
