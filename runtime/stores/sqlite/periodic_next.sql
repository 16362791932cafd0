SELECT next_run FROM corral_periodic WHERE kind = ?;
