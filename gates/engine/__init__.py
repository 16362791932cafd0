"""The engine: runs the rules over a project (parse once, cache, parallel workers), then the whole-project checks."""
