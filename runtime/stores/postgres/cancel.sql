-- Cancel the given jobs that are not final yet and announce them as finished: their waiters answer, and
-- the process running one of them stops its attempt. A running one keeps its worker_id. The error an earlier
-- attempt left is cleared: it is not the cancelled attempt's (the attempts trigger records a running one's
-- attempt from this row), and the attempts history keeps it.
WITH c AS (UPDATE {jobs} SET state = 'cancelled', finished_at = now(), lease_until = NULL, last_error = NULL,
    last_traceback = NULL
    WHERE id = ANY(%s::bigint[]) AND state IN ('waiting', 'retrying', 'running') RETURNING id)
SELECT id, pg_notify(%s, 'f ' || id) FROM c
