"""StandMeet, a small example service built on corral.runtime (see README.md in this folder)."""
