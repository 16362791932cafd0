-- A plain read before claiming: an idle poller (every process polls) must not take the write lock.
SELECT 1 FROM corral_jobs WHERE queue = ? AND state IN ('waiting', 'retrying') AND run_at <= ? LIMIT 1;
