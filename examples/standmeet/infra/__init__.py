"""StandMeet's plumbing: the only package of the example allowed to own background tasks or threads."""
