-- Settle only the claim we hold (token = claims); a job rescued and re-claimed elsewhere belongs
-- to its new holder; a cancelled job stays cancelled.
WITH done AS (UPDATE {jobs} j SET state = 'done', result = v.r::jsonb, finished_at = now(),
    lease_until = NULL, worker_id = NULL
    FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, t, r)
    WHERE j.id = v.id AND j.claims = v.t AND j.state NOT IN ('done', 'cancelled') RETURNING j.id)
SELECT COUNT(*), COUNT(pg_notify(%s, 'f ' || ids)) FROM
    (SELECT string_agg(id::text, ',') AS ids FROM done HAVING COUNT(*) > 0) s
