UPDATE corral_periodic SET next_run = ? WHERE kind = ?;
