"""The top layer: the `corral` command and its subcommands (check, jobs --static, fix, prove, export)."""
