"""The `corral` command: `check` runs the gate, `baseline` records the findings a project accepts, `jobs
--static` lists job kinds and their timeouts, `fix` rewrites declarations; `export` configures other tools;
`worker`, `jobs` and `migrate` drive the runtime.

Exit codes: 0 clean, 1 findings, 2 a usage or configuration error.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _check(args: argparse.Namespace) -> int:
    import gc

    # Parsing allocates millions of short-lived objects and no cycles worth collecting: the collector
    # would only rescan them (measured: parsing takes twice as long with it on).
    gc.disable()
    from corral.gates.config import load_config
    from corral.gates.engine.run import check_paths
    from corral.gates.findings import code_family
    from corral.gates.outputs import FORMATS

    paths = args.paths or ["."]
    config = load_config(paths, args.config)
    if args.strict:
        config = config._replace(strict=True)
    if args.select is not None:
        from corral.gates.engine.run import selected_codes

        selected_codes(args.select, "--select")
        config = config._replace(select=args.select)
    baseline_file = Path(args.baseline) if args.baseline else config.root / config.baseline if config.baseline else None
    if baseline_file is not None:
        from corral.gates.cli.baseline import read_baseline

        baseline = read_baseline(baseline_file)  # before the run: a baseline it cannot use stops it at once
    result = check_paths(paths, config, use_cache=not args.no_cache)
    notes: list[str] = []
    baseline_fixed = False
    if baseline_file is not None:
        from corral.gates.cli.baseline import report_against

        result, notes, baseline_fixed = report_against(baseline_file, baseline, result, config, paths)
    # The budget table needs the CRL3 rule's module (and so every rule): it is printed when asked for or
    # when a budget is over or unproven (a CRL3 finding), and a warm run of any other project, one with job
    # kinds included, loads no rule.
    if args.format == "text" and (
        args.budget or any(code_family(finding.code) == "CRL3" for finding in result.findings)
    ):
        from corral.gates.rules.connection_budget import ConnectionBudgetCheck, render_budget

        # Before the findings, so the summary line stays the last line.
        sys.stdout.write(render_budget(result.reports.get(ConnectionBudgetCheck.REPORT, [])))
    sys.stdout.write(FORMATS[args.format](result))
    if notes:
        # After the output, so what fails a clean-looking run is the last thing a terminal shows.
        sys.stdout.flush()
        print("\n".join(notes), file=sys.stderr)
    return EXIT_FINDINGS if result.findings or baseline_fixed else EXIT_CLEAN


def _baseline(args: argparse.Namespace) -> int:
    from corral.gates.cli.baseline import baseline_command

    return baseline_command(args.paths or ["."], args.config, args.output)


def _jobs_static(args: argparse.Namespace) -> int:
    from corral.gates.cli.jobs import jobs_command

    return jobs_command(args.paths or ["."], args.config, strict=args.strict, as_json=args.format == "json")


def _fix(args: argparse.Namespace) -> int:
    from corral.gates.cli.fix import fix_command

    return fix_command(args.paths or ["."], args.config, seconds=args.add_timeouts)


def _prove(args: argparse.Namespace) -> int:
    from corral.gates.cli.prove import prove

    return prove(args.path, args.config, as_json=args.format == "json")


def _export(args: argparse.Namespace) -> int:
    from corral.gates.cli.export import run_export

    return run_export(args)


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
    check.add_argument("--budget", action="store_true", help="print every runtime's connection budget (text format)")
    check.add_argument("--strict", action="store_true", help="demand explicit job timeouts (also: strict = true)")
    check.add_argument(
        "--select",
        type=_selectors,
        metavar="CODES",
        help="run only these rule families or codes, comma-separated: CRL1,CRL401 (also: select = [...])",
    )
    check.add_argument(
        "--baseline",
        metavar="FILE",
        help="fail only on findings not in FILE, and on its entries that no longer occur (also: baseline = FILE)",
    )
    check.set_defaults(handler=_check)
    baseline = commands.add_parser("baseline", help="write every current finding to the baseline file")
    baseline.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    baseline.add_argument(
        "--output", metavar="FILE", help="where to write it (default: the baseline key, else corral-baseline.json)"
    )
    baseline.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    baseline.set_defaults(handler=_baseline)
    export = commands.add_parser("export", help="print configuration for another tool: corral export ruff")
    export.add_argument("tool", choices=["ruff"])
    export.add_argument("path", nargs="?", default=".", metavar="PATH", help="where to look for the config")
    export.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    export.set_defaults(handler=_export)
    proving = commands.add_parser("prove", help="plant one violation per rule family in a copy; show the gate goes red")
    proving.add_argument("path", nargs="?", default=".", metavar="PATH")
    proving.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    proving.add_argument("--format", choices=["text", "json"], default="text")
    proving.set_defaults(handler=_prove)
    commands.add_parser("worker", help="run a worker process: corral worker MODULE:RUNTIME", add_help=False)
    jobs = commands.add_parser(
        "jobs", help="job counts per queue: corral jobs MODULE:RUNTIME; every job kind's timeout: corral jobs --static"
    )
    jobs.add_argument("--static", action="store_true", required=True, help="read the code, never import it")
    jobs.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    jobs.add_argument("--format", choices=["text", "json"], default="text")
    jobs.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    jobs.add_argument("--strict", action="store_true", help="demand explicit job timeouts")
    jobs.set_defaults(handler=_jobs_static)
    fix = commands.add_parser("fix", help="rewrite failing declarations: corral fix --add-timeouts SECONDS")
    fix.add_argument("--add-timeouts", type=_seconds, required=True, metavar="SECONDS")
    fix.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    fix.add_argument("--config", metavar="FILE", help="a pyproject.toml or corral.toml to use")
    fix.set_defaults(handler=_fix)
    commands.add_parser("migrate", help="create or upgrade the job store's schema", add_help=False)
    commands.add_parser("ui", help="a web dashboard of a runtime's jobs: corral ui MODULE:RUNTIME", add_help=False)
    return parser


def _selectors(text: str) -> tuple[str, ...]:
    selectors = tuple(sorted({part.strip() for part in text.split(",") if part.strip()}))
    bad = [selector for selector in selectors if not re.fullmatch(r"CRL\d{1,3}", selector)]
    if not selectors or bad:
        raise argparse.ArgumentTypeError(f"expected rule families or codes like CRL1,CRL401, got {text!r}")
    return selectors


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # `corral jobs --static` reads the code (the gate); `corral jobs MODULE:RUNTIME` asks the runtime.
    static_jobs = arguments[:1] == ["jobs"] and "--static" in arguments
    if arguments and arguments[0] in ("worker", "jobs", "migrate", "ui") and not static_jobs:
        # The runtime's own commands are handed over by name: the gate depends on no runtime code but the
        # budget arithmetic (an import-linter contract holds it to that), and `corral check` never loads it.
        import importlib

        runtime_cli = importlib.import_module("corral.runtime.cli")
        entry: Callable[[list[str]], int] = getattr(runtime_cli, f"{arguments[0]}_main")
        return entry(arguments[1:])
    parser = _parser()
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    from corral.gates.cli.baseline import BaselineError
    from corral.gates.config import ConfigError

    # Every command reports a configuration it cannot use, or a path that does not exist, the same way.
    try:
        code: int = args.handler(args)
    except ConfigError as error:
        print(f"corral: config error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BaselineError as error:
        print(f"corral: baseline error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except FileNotFoundError as error:
        print(f"corral: no such file or directory: {error.args[0] if error.args else error}", file=sys.stderr)
        return EXIT_ERROR
    return code
