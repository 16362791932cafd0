-- A database the store created before it recorded versions has corral_jobs and no version row.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'corral_jobs';
