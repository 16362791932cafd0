DELETE FROM {jobs} WHERE state = 'done' AND finished_at < now() - %s * interval '1 second'
