UPDATE {periodic} SET next_run = now() + %s * interval '1 second' WHERE kind = %s AND next_run <= now()
RETURNING kind
