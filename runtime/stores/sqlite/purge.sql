-- Only final states reach here (protocol.check_final_states); the attempts go with their job (a trigger).
DELETE FROM corral_jobs WHERE state IN (SELECT value FROM json_each(?)) AND finished_at < ?;
