-- claim.sql with completions riding along (complete.sql's update and notice; worker_id stays, as there):
-- a claim loop's pass settles the finished jobs the completer holds and claims new ones in one statement,
-- one round trip instead of two. Both updates see one snapshot and touch different rows (running jobs are
-- settled, runnable ones claimed). A CTE that modifies nothing runs only when read: the outer query reads
-- the notice's one row first, so it is sent even when nothing is claimed (a row of NULLs then). Keep it
-- alike with claim.sql and complete.sql; {limit} is a literal, as there.
WITH done AS (UPDATE {jobs} j SET state = 'done', result = v.r::jsonb, finished_at = now(), lease_until = NULL
    FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, t, r)
    WHERE j.id = v.id AND j.claims = v.t AND j.state NOT IN ('done', 'cancelled') RETURNING j.id),
noticed AS (SELECT COUNT(pg_notify(%s, 'f ' || ids)) AS sent FROM
    (SELECT string_agg(id::text, ',') AS ids FROM done HAVING COUNT(*) > 0) s),
claimed AS (UPDATE {jobs} j SET state = 'running', attempt = j.attempt + 1, claims = j.claims + 1,
    worker_id = %s, started_at = now(), lease_until = now() + j.lease_seconds * interval '1 second'
    FROM (SELECT id FROM {jobs} WHERE queue = %s AND state IN ('waiting', 'retrying') AND run_at <= now()
        ORDER BY priority DESC, run_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED) c
    WHERE j.id = c.id
    RETURNING j.id, j.kind, j.args::text, j.key, j.attempt, j.max_attempts, j.claims,
        extract(epoch FROM j.enqueued_at)::float8, extract(epoch FROM j.run_at)::float8, j.crashes, j.priority,
        j.retries)
SELECT claimed.* FROM noticed LEFT JOIN claimed ON true
