"""The `corral` command: `check` runs the gate, `baseline` records the findings a project accepts, `jobs
--static` lists job kinds and their timeouts, `fix` rewrites declarations; `rule` prints a code's
documentation; `export` configures other tools; `worker`, `jobs` and `migrate` drive the runtime.

Exit codes: 0 clean, 1 findings, 2 a usage or configuration error (or, for `check`, a report it could not
write).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from corral.gates.cli.reports import Report
    from corral.gates.config import Config
    from corral.gates.engine.run import CheckResult

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _check(args: argparse.Namespace) -> int:
    import gc

    # Parsing allocates millions of short-lived objects and no cycles worth collecting: the collector
    # would only rescan them (measured: parsing takes twice as long with it on).
    gc.disable()
    from corral.gates.cli.reports import planned_reports, write_reports
    from corral.gates.engine.projects import config_errors
    from corral.gates.findings import code_family

    reports = planned_reports(args.outputs, args.command_parser)
    text_report = any(report.format == "text" for report in reports)
    if args.statistics and not text_report:
        args.command_parser.error("--statistics counts findings in the text report: add --format text")
    stdin_path = _stdin_path(args)
    if args.select is not None:
        from corral.gates.engine.run import selected_codes

        selected_codes(args.select, "--select")

    def adjust(config: Config) -> Config:
        if args.strict:
            config = config._replace(strict=True)
        return config if args.select is None else config._replace(select=args.select)

    if stdin_path is not None:
        result, notes, baseline_fixed = _check_stdin(stdin_path, args, adjust)
    else:
        result, notes, baseline_fixed = _check_projects(args.paths or ["."], args, adjust)
    # The budget table needs the CRL3 rule's module (and so every rule): it is printed when asked for or
    # when a budget is over or unproven (a CRL3 finding; not under --quiet), and a warm run of any other
    # project, one with job kinds included, loads no rule.
    budget = ""
    over_budget = not args.quiet and any(code_family(finding.code) == "CRL3" for finding in result.findings)
    if text_report and (args.budget or over_budget):
        from corral.gates.rules.connection_budget import ConnectionBudgetCheck, render_budget

        budget = render_budget(result.reports.get(ConnectionBudgetCheck.REPORT, []))
    written = write_reports(reports, lambda report: _render(report, result, args, budget))
    if notes:
        # After the output, so what fails a clean-looking run is the last thing a terminal shows.
        sys.stdout.flush()
        print("\n".join(notes), file=sys.stderr)
    # A project whose settings are unusable was not checked: no verdict on it.
    if not written or config_errors(result):
        return EXIT_ERROR
    return EXIT_FINDINGS if result.findings or baseline_fixed else EXIT_CLEAN


def _check_projects(
    paths: list[str], args: argparse.Namespace, adjust: Callable[[Config], Config]
) -> tuple[CheckResult, list[str], bool]:
    """Each file under `paths` checked by its own project's settings and baseline: the result, the notes to
    print after the output, and whether a baseline entry no longer occurs."""
    from corral.gates.cli.baseline import project_baselines, report_against
    from corral.gates.engine.projects import Project, check_projects, find_projects

    projects = find_projects(paths, args.config)
    for project in projects:
        _warn_shadowed(project.source)
    # Read before the run: a baseline it cannot use stops it at once.
    baselines = project_baselines(projects, args.baseline)
    notes: list[str] = []
    baseline_fixed = False

    def against_baseline(project: Project, config: Config, result: CheckResult) -> CheckResult:
        nonlocal baseline_fixed
        if project.root not in baselines:
            return result
        baseline_file, baseline = baselines[project.root]
        result, more_notes, fixed = report_against(baseline_file, baseline, result, config, project.covers_root)
        notes.extend(more_notes)
        baseline_fixed = baseline_fixed or fixed
        return result

    result = check_projects(projects, adjust, use_cache=not args.no_cache, finish=against_baseline)
    return result, notes, baseline_fixed


def _check_stdin(
    stdin_path: str, args: argparse.Namespace, adjust: Callable[[Config], Config]
) -> tuple[CheckResult, list[str], bool]:
    """The source on stdin judged as the file at `stdin_path`, by that path's nearest configuration and its
    baseline; returns what `_check_projects` does."""
    from corral.gates.cli.baseline import baseline_file_of, read_baseline, report_against
    from corral.gates.config import load_config
    from corral.gates.engine.run import check_sources, relative_path

    config = adjust(load_config([stdin_path], args.config))
    _warn_shadowed(config.source)
    baseline_file = baseline_file_of(config, args.baseline)
    # Before the run: a baseline it cannot use stops it at once.
    baseline = read_baseline(baseline_file) if baseline_file is not None else None
    # At most one byte over the limit is read: past it the source is CRL001 whatever follows.
    sources = {relative_path(stdin_path, config.root): sys.stdin.buffer.read(config.max_file_size + 1)}
    result = check_sources(sources.items(), config)
    if baseline_file is None or baseline is None:
        return result, [], False
    # A finding in the source on stdin is matched by that source's lines, not the file on disk; one file
    # never covers the project's root.
    return report_against(baseline_file, baseline, result, config, False, sources)


def _warn_shadowed(source: Path | None) -> None:
    """Warn when a `corral.toml` keeps the `[tool.corral]` of the `pyproject.toml` beside it from being read."""
    from corral.gates.config import shadowed_table

    shadowed = shadowed_table(source) if source is not None else None
    if shadowed is not None:
        print(f"corral: warning: {shadowed}: [tool.corral] not read: {source} beside it wins", file=sys.stderr)


def _stdin_path(args: argparse.Namespace) -> str | None:
    """The path the source read from stdin is judged as (`-` with `--stdin-filename`), or None."""
    reads_stdin = "-" in args.paths or (args.stdin_filename is not None and not args.paths)
    if not reads_stdin:
        if args.stdin_filename is not None:
            args.command_parser.error("--stdin-filename names the source read from stdin: give - as the path")
        return None
    if args.paths not in ([], ["-"]):
        args.command_parser.error("- (the source on stdin) is checked alone: give no other path with it")
    if args.stdin_filename is None:
        args.command_parser.error(
            "- reads the source from stdin: add --stdin-filename PATH, the file it is judged as (its settings,"
            " whether it is infra or a test)"
        )
    return os.path.realpath(str(args.stdin_filename))


def _render(report: Report, result: CheckResult, args: argparse.Namespace, budget: str) -> str:
    from corral.gates.outputs import FORMATS

    if report.format != "text":
        return FORMATS[report.format](result)
    from corral.gates.cli.reports import wants_color
    from corral.gates.outputs.text import render_text

    # Colour only where a person reads it: a report file never holds escape sequences.
    color = report.file is None and wants_color(args.color, sys.stdout, os.environ)
    # The budget goes before the findings, so the summary line stays the last line.
    return budget + render_text(result, color=color, statistics=args.statistics, quiet=args.quiet)


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


CHECK_EPILOG = """\
reports: each --format writes to standard output, or to the -o FILE that follows it; -o before any
--format is the text report's file. One run writes them all from the same findings, e.g.
  corral check --format github --format sarif -o corral.sarif --format markdown -o summary.md
At most one report goes to standard output; text there is coloured on a terminal (--color).

exit codes:
  0  no findings
  1  findings (or baseline entries that no longer occur)
  2  a usage, configuration or baseline error, or a report that could not be written
"""


def _rule(args: argparse.Namespace) -> int:
    from corral.gates.cli.rule import rule_command

    return rule_command(args.code, every=args.all)


def _parser() -> argparse.ArgumentParser:
    from corral.gates.cli.reports import COLOR_CHOICES, FormatAction, OutputFileAction
    from corral.gates.outputs import FORMATS

    parser = argparse.ArgumentParser(
        prog="corral", description="Keep background work bounded, time-limited and stoppable."
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print corral's version and those of Python and libcst"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    config_help = "a pyproject.toml or corral.toml to use (default: the nearest one with corral's settings)"
    check = commands.add_parser(
        "check",
        help="run the gate over Python files",
        description="Run the gate over Python files: every file git knows of under PATH, or the files named.",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads one file from stdin"
    )
    check.add_argument(
        "--format",
        dest="outputs",
        action=FormatAction,
        choices=sorted(FORMATS),
        help="a report to write, repeatable, each to stdout or the -o after it (default: text)",
    )
    check.add_argument(
        "-o",
        "--output-file",
        dest="outputs",
        action=OutputFileAction,
        metavar="FILE",
        help="write the report of the --format before it to FILE instead of stdout",
    )
    check.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="the path the source on stdin (-) is judged as: its settings, whether it is infra or a test",
    )
    check.add_argument("--config", metavar="FILE", help=config_help)
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
    check.add_argument(
        "--statistics", action="store_true", help="count the findings per code, after them in the text report"
    )
    check.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="the findings only: no summary line (and no budget table unless --budget)",
    )
    check.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        help="colour the text on stdout (default auto: on a terminal, unless NO_COLOR is set or FORCE_COLOR is)",
    )
    check.set_defaults(handler=_check, command_parser=check)
    baseline = commands.add_parser("baseline", help="write every current finding to the baseline file")
    baseline.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    baseline.add_argument(
        "--output", metavar="FILE", help="where to write it (default: the baseline key, else corral-baseline.json)"
    )
    baseline.add_argument("--config", metavar="FILE", help=config_help)
    baseline.set_defaults(handler=_baseline, command_parser=baseline)
    export = commands.add_parser("export", help="print configuration for another tool: corral export ruff")
    export.add_argument("tool", choices=["ruff"], help="the tool to configure: ruff (a banned-api fragment)")
    export.add_argument("path", nargs="?", default=".", metavar="PATH", help="where to look for the config")
    export.add_argument("--config", metavar="FILE", help=config_help)
    export.set_defaults(handler=_export, command_parser=export)
    proving = commands.add_parser("prove", help="plant one violation per rule family in a copy; show the gate goes red")
    proving.add_argument("path", nargs="?", default=".", metavar="PATH", help="the project to copy (default: .)")
    proving.add_argument("--config", metavar="FILE", help=config_help)
    proving.add_argument("--format", choices=["text", "json"], default="text", help="the report (default: text)")
    proving.set_defaults(handler=_prove, command_parser=proving)
    rule = commands.add_parser("rule", help="print a rule code's documentation: corral rule CRL101")
    rule.add_argument("code", nargs="?", metavar="CODE", help="a code or family (CRL101, CRL1); none: list every code")
    rule.add_argument("--all", action="store_true", help="print every code's documentation")
    rule.set_defaults(handler=_rule, command_parser=rule)
    commands.add_parser("worker", help="run a worker process: corral worker MODULE:RUNTIME", add_help=False)
    jobs = commands.add_parser(
        "jobs", help="job counts per queue: corral jobs MODULE:RUNTIME; every job kind's timeout: corral jobs --static"
    )
    jobs.add_argument("--static", action="store_true", required=True, help="read the code, never import it")
    jobs.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    jobs.add_argument("--format", choices=["text", "json"], default="text", help="the report (default: text)")
    jobs.add_argument("--config", metavar="FILE", help=config_help)
    jobs.add_argument("--strict", action="store_true", help="demand explicit job timeouts")
    jobs.set_defaults(handler=_jobs_static, command_parser=jobs)
    fix = commands.add_parser("fix", help="rewrite failing declarations: corral fix --add-timeouts SECONDS")
    fix.add_argument(
        "--add-timeouts",
        type=_seconds,
        required=True,
        metavar="SECONDS",
        help="the hard limit, in seconds, to add to each failing job kind it can rewrite",
    )
    fix.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .)")
    fix.add_argument("--config", metavar="FILE", help=config_help)
    fix.set_defaults(handler=_fix, command_parser=fix)
    commands.add_parser("migrate", help="create or upgrade the job store's schema", add_help=False)
    commands.add_parser("ui", help="a web dashboard of a runtime's jobs: corral ui MODULE:RUNTIME", add_help=False)
    return parser


class _VersionAction(argparse.Action):
    """`--version`: corral's and what decides its findings (the Python that parses, libcst that rewrites)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option: str | None = None
    ) -> None:
        import platform
        from importlib.metadata import version

        print(f"corral {version('corral')} (Python {platform.python_version()}, libcst {version('libcst')})")
        parser.exit()


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


# What a shell reports for a command that SIGPIPE ended (128 + 13): the output was cut short, nothing failed.
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130  # 128 + SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`corral rule | head`, `corral jobs ... list | head`): what it did not read
        # is not an error of ours. Standard output is pointed at /dev/null so the flush at exit is quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # Ctrl-C before a command installs its own handling (loading a worker's target, a long check): the
        # shell's code for an interrupted command, and no traceback.
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
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
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        # The subcommand's own usage, not the top-level one: that is where the flag was given.
        (args.command_parser if args.command is not None else parser).error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    from corral.gates.cli.baseline import BaselineError
    from corral.gates.config import ConfigError

    # Every command reports a configuration it cannot use, or a path that does not exist, the same way.
    try:
        code: int = args.handler(args)
    except (ConfigError, BaselineError, FileNotFoundError) as error:
        message = _error_message(error)
        sarif = [report for report in getattr(args, "outputs", None) or [] if report.format == "sarif"]
        if args.command == "check" and sarif:
            # Code scanning reads the log whatever the exit code: an empty one would look like a clean run.
            from corral.gates.cli.reports import write_reports
            from corral.gates.outputs.sarif import render_sarif_failure

            write_reports(sarif, lambda _: render_sarif_failure(message))
        print(f"corral: {message}", file=sys.stderr)
        return EXIT_ERROR
    return code


def _error_message(error: Exception) -> str:
    from corral.gates.cli.baseline import BaselineError
    from corral.gates.config import ConfigError

    if isinstance(error, ConfigError):
        return f"config error: {error}"
    if isinstance(error, BaselineError):
        return f"baseline error: {error}"
    return f"no such file or directory: {error.args[0] if error.args else error}"
