DELETE FROM corral_events WHERE id = ?;
