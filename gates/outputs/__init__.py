"""How a check's result is written: one renderer per output format."""
