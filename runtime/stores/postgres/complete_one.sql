-- complete.sql for one completion, its values as scalars: no arrays to dump, and a plan the server
-- keeps (an unnest of parameters is planned again on every call). Keep the two alike.
WITH done AS (UPDATE {jobs} SET state = 'done', result = %s::jsonb, finished_at = now(), lease_until = NULL
    WHERE id = %s::bigint AND claims = %s::int AND state NOT IN ('done', 'cancelled') RETURNING id)
SELECT COUNT(*), COUNT(pg_notify(%s, 'f ' || id)) FROM done
