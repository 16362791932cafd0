SELECT id, queue, kind, args, attempt, max_attempts, last_error, last_traceback, finished_at
FROM corral_jobs WHERE state = 'failed' ORDER BY finished_at DESC, id DESC LIMIT ?;
