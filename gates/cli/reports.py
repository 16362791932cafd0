"""Where `corral check`'s reports go: each `--format` paired with the `-o/--output-file` that follows it
(standard output when none does), whether text on a terminal is coloured, and writing every report of one
run, so CI checks once and gets its annotations, SARIF and job summary from the same findings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TextIO

COLOR_CHOICES = ("auto", "always", "never")


class Report(NamedTuple):
    """One output of a run: a format and the file it is written to (None: standard output)."""

    format: str
    file: str | None = None


class FormatAction(argparse.Action):
    """`--format F`: one more report, to standard output until an `--output-file` follows it."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), Report(str(values))])


class OutputFileAction(argparse.Action):
    """`-o/--output-file FILE`: where the report of the `--format` before it goes (before any, the text one)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        reports: list[Report] = list(getattr(namespace, self.dest) or [])
        if not reports:
            reports.append(Report("text"))
        if reports[-1].file is not None:
            parser.error(
                f"{option} {values}: the --format {reports[-1].format} before it already goes to {reports[-1].file};"
                " give each file its own --format (--format sarif -o corral.sarif --format markdown -o summary.md)"
            )
        reports[-1] = reports[-1]._replace(file=str(values))
        setattr(namespace, self.dest, reports)


def planned_reports(given: Sequence[Report] | None, parser: argparse.ArgumentParser) -> list[Report]:
    """The reports a run writes (text to standard output when none was asked for); a usage error for two
    reports to standard output or two to one file."""
    reports = list(given or [Report("text")])
    to_stdout = [report.format for report in reports if report.file is None]
    if len(to_stdout) > 1:
        parser.error(
            f"--format {' and --format '.join(to_stdout)} would both go to standard output;"
            " give all but one of them an --output-file FILE after it"
        )
    seen: dict[str, str] = {}
    for report in reports:
        if report.file is None:
            continue
        target = os.path.realpath(report.file)
        if target in seen:
            parser.error(f"--format {seen[target]} and --format {report.format} would both write {report.file}")
        seen[target] = report.format
    return reports


def wants_color(choice: str, stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether text to `stream` is coloured: `always`/`never` as said; `auto` as Python's own tools decide
    (a non-empty NO_COLOR turns it off, then a non-empty FORCE_COLOR on, then TERM=dumb off, else a
    terminal gets colour)."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    if environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


def write_reports(reports: Sequence[Report], render: Callable[[Report], str]) -> bool:
    """Write every report, the files first and standard output last (so a terminal ends on the summary
    line); False when a file could not be written (each such failure said on stderr, the others written)."""
    written = True
    for report in reports:
        if report.file is None:
            continue
        try:
            with open(report.file, "w", encoding="utf-8") as output:
                output.write(render(report))
        except OSError as error:
            print(
                f"corral: cannot write the {report.format} report to {report.file}: {error.strerror or error}",
                file=sys.stderr,
            )
            written = False
    for report in reports:
        if report.file is None:
            sys.stdout.write(render(report))
    return written
