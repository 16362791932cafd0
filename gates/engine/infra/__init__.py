"""The gate's own process plumbing: the one place corral.gates starts processes."""
