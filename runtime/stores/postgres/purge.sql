-- Only final states reach here (protocol.check_final_states); the attempts go with their job (ON DELETE CASCADE).
DELETE FROM {jobs} WHERE state = ANY(%s::text[]) AND finished_at < now() - %s * interval '1 second'
