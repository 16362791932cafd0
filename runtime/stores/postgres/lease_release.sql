-- Free the holder's slots and announce the queue, so a claimer anywhere takes the key's next job now.
WITH freed AS (UPDATE {key_leases} SET holder = NULL, busy_until = NULL
    WHERE queue = %s AND key = %s AND holder = %s RETURNING queue)
SELECT COUNT(pg_notify(%s, 'j ' || queue)) FROM (SELECT DISTINCT queue FROM freed) q
