"""What several formats share: where each finding's file is shown, the summary line, and the code table a
run's findings are shown against.

Paths: a finding's `path` is relative to its project's root (what the baseline and JSON keep); `located`
gives every format the file's absolute path, the path text prints (relative to the working directory where
the file is below it, as ruff prints them) and the path CI consumers place on a file (relative to the git
work tree's top, where GitHub's annotations and code scanning look for it, whatever folder the gate ran
in; outside a work tree, the path text prints), computed here once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding

if TYPE_CHECKING:
    from corral.gates.outputs.fingerprints import Fingerprinted


class Located(NamedTuple):
    """A finding with the places its file is named by."""

    finding: Finding
    absolute: str
    # Relative to the working directory where the file is below it, else absolute.
    shown: str
    # Relative to the git top level (`repository_top`), `/`-separated; None outside that work tree.
    in_repository: str | None

    @property
    def for_ci(self) -> str:
        """The path a CI consumer places the finding on: in the repository where it is, else as text shows it."""
        return self.in_repository if self.in_repository is not None else self.shown


def repository_top(result: CheckResult) -> Path | None:
    """The top of the git work tree holding the run's root; None outside git."""
    from corral.gates.source.discovery import git_top_level

    top = git_top_level(str(result.root)) if result.root.is_dir() else None
    return Path(top) if top is not None else None


def _parts(result: CheckResult) -> tuple[CheckResult, ...]:
    """The results whose findings' paths are relative to their own `root`: each project's, or the run's."""
    return result.projects or (result,)


def _placed(root: Path, finding: Finding, here: str, top_prefix: str | None) -> Located:
    absolute = os.path.normpath(os.path.join(root, finding.path))
    shown = absolute[len(here) :] if absolute.startswith(here) else absolute
    in_repository = absolute[len(top_prefix) :] if top_prefix is not None and absolute.startswith(top_prefix) else None
    return Located(finding, absolute, shown, in_repository)


def _order(place: Located) -> tuple[object, ...]:
    return (place.absolute, *place.finding[1:])


def located(result: CheckResult, top: Path | None = None) -> list[Located]:
    """Every finding of the run with its file's paths, ordered by file, line and column; `top` is the run's
    `repository_top`."""
    here = os.path.join(os.getcwd(), "")
    top_prefix = os.path.join(str(top), "") if top is not None else None
    every = [_placed(part.root, finding, here, top_prefix) for part in _parts(result) for finding in part.findings]
    return sorted(every, key=_order)


def located_fingerprinted(result: CheckResult, top: Path | None) -> list[tuple[Located, Fingerprinted]]:
    """`located`, each finding with its fingerprint (`outputs.fingerprints`), read in its own project: the
    file it names is under that project's root, read within that project's size bound."""
    # Loaded here: text, the format most runs write, reads no line again.
    from corral.gates.outputs.fingerprints import fingerprinted

    here = os.path.join(os.getcwd(), "")
    top_prefix = os.path.join(str(top), "") if top is not None else None
    every = [
        (_placed(part.root, marked.finding, here, top_prefix), marked)
        for part in _parts(result)
        for marked in fingerprinted(part.findings, part.root, part.max_file_size, part.sources)
    ]
    return sorted(every, key=lambda pair: _order(pair[0]))


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def summary(result: CheckResult) -> str:
    checked = f"{plural(result.files, 'file')} checked"
    if result.not_run:
        checked += f"; not run: {', '.join(result.not_run)}"
    stale = stale_baseline(result)
    if not result.findings:
        if stale:
            return f"No new findings, but {stale} ({checked})."
        return f"All checks passed ({checked})."
    files = len({place.absolute for place in located(result)})
    found = f"Found {plural(len(result.findings), 'finding')} in {plural(files, 'file')}"
    return f"{found}; {stale} ({checked})." if stale else f"{found} ({checked})."


def stale_baseline(result: CheckResult) -> str:
    """What fails a run beside its findings, in words ('' when nothing): baseline entries that no longer
    occur, which the baseline must drop (`corral baseline`) before the run passes."""
    count = result.stale_baseline
    if not count:
        return ""
    entries = "entry of the baseline no longer occurs" if count == 1 else "entries of the baseline no longer occur"
    return f"{count} {entries}: rewrite it with corral baseline"


def code_table(result: CheckResult) -> dict[str, str]:
    """Every code with its summary, sorted: the registry's, and any a finding carries beside them."""
    # The registry loads every rule: only the formats that show the table (SARIF, JUnit, markdown) pay.
    from corral.gates.rules import CODES

    codes = {**{f.code: f.code for f in result.findings}, **CODES}
    return dict(sorted(codes.items()))
