-- Cancel the given jobs that are not final yet and announce them as finished: their waiters answer, and
-- the process running one of them stops its attempt. A running one keeps its worker_id.
WITH c AS (UPDATE {jobs} SET state = 'cancelled', finished_at = now(), lease_until = NULL
    WHERE id = ANY(%s::bigint[]) AND state IN ('waiting', 'retrying', 'running') RETURNING id)
SELECT id, pg_notify(%s, 'f ' || id) FROM c
