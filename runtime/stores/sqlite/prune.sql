DELETE FROM corral_jobs WHERE state = ? AND finished_at < ?;
