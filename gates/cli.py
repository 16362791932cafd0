"""The `corral` command: `check` runs the gate; `worker` and `jobs` drive the runtime.

Exit codes: 0 clean, 1 findings, 2 a usage or configuration error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _check(args: argparse.Namespace) -> int:
    import gc

    # Parsing allocates millions of short-lived objects and no cycles worth collecting: the collector
    # would only rescan them (measured: parsing takes twice as long with it on).
    gc.disable()
    from corral.gates.config import ConfigError, load_config
    from corral.gates.engine import check_paths
    from corral.gates.outputs import FORMATS

    paths = args.paths or ["."]
    try:
        config = load_config(paths, args.config)
        result = check_paths(paths, config, use_cache=not args.no_cache)
    except ConfigError as error:
        print(f"corral: config error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except FileNotFoundError as error:
        print(f"corral: no such file or directory: {error.args[0]}", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(FORMATS[args.format](result))
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


def _parser() -> argparse.ArgumentParser:
    from corral.gates.outputs import FORMATS

    parser = argparse.ArgumentParser(
        prog="corral", description="Keep background work bounded, time-limited and stoppable."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = commands.add_parser("check", help="run the gate over Python files")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    check.add_argument("--format", choices=sorted(FORMATS), default="text")
    check.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    check.add_argument("--no-cache", action="store_true", help="ignore and do not write .corral_cache/")
    check.set_defaults(handler=_check)
    commands.add_parser("worker", help="run a worker process: corral worker MODULE:RUNTIME", add_help=False)
    commands.add_parser("jobs", help="job counts per queue: corral jobs MODULE:RUNTIME", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in ("worker", "jobs"):
        from corral.runtime import cli as runtime_cli

        entry = runtime_cli.worker_main if arguments[0] == "worker" else runtime_cli.jobs_main
        return entry(arguments[1:])
    parser = _parser()
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    handler = args.handler
    code: int = handler(args)
    return code
