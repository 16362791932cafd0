-- Settle only the claim we hold (token = claims); a job rescued and re-claimed elsewhere belongs
-- to its new holder; a cancelled job stays cancelled. worker_id stays: the done row is the record of its
-- last attempt (attempt_list.sql), which the attempts trigger does not write for a success.
WITH done AS (UPDATE {jobs} j SET state = 'done', result = v.r::jsonb, finished_at = now(), lease_until = NULL
    FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, t, r)
    WHERE j.id = v.id AND j.claims = v.t AND j.state NOT IN ('done', 'cancelled') RETURNING j.id)
SELECT COUNT(*), COUNT(pg_notify(%s, 'f ' || ids)) FROM
    (SELECT string_agg(id::text, ',') AS ids FROM done HAVING COUNT(*) > 0) s
