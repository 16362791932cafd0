SELECT pg_notify(%s, %s)
