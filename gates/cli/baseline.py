"""The baseline: the findings a project accepted when it adopted corral, so that `corral check --baseline FILE`
fails only on new ones; `corral baseline [PATH...]` writes it.

An entry is keyed by the finding's path (relative to the project root), its code and its fingerprint
(`outputs.fingerprints`: the offending line's text with whitespace collapsed, plus an occurrence index among
identical keys of one file), which SARIF results carry too: moving code or re-indenting it keeps its entry,
editing the line does not. An entry that no
longer occurs is reported as fixed and fails the run until the baseline is rewritten, so a baseline only
shrinks. Nothing is suppressed inline or by path: the file lists each accepted finding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import Config
from corral.gates.engine.projects import Project
from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding
from corral.gates.outputs.fingerprints import fingerprinted

DEFAULT_BASELINE = "corral-baseline.json"
VERSION = 1
# How much of the offending line an entry shows a reviewer; the fingerprint covers all of it.
SHOWN_TEXT = 120


class BaselineError(Exception):
    """A baseline that cannot be read or is not one; the message names its path."""


class Entry(NamedTuple):
    """One accepted finding."""

    path: str
    code: str
    fingerprint: str
    occurrence: int


class Applied(NamedTuple):
    """A run's findings against a baseline: the new ones, the entries that no longer occur, how many matched."""

    new: list[Finding]
    fixed: list[tuple[Entry, str]]
    accepted: int


def keyed(
    findings: Iterable[Finding], config: Config, sources: Mapping[str, bytes] | None = None
) -> list[tuple[Entry, Finding, str]]:
    """Every finding with its entry and the offending line's normalised text, read from `sources` (relative
    path to the source that was checked, as read from stdin) for the files it holds, else from disk."""
    return [
        (
            Entry(marked.finding.path, marked.finding.code, marked.fingerprint, marked.occurrence),
            marked.finding,
            marked.text,
        )
        for marked in fingerprinted(findings, config.root, config.max_file_size, sources)
    ]


def read_baseline(path: Path) -> dict[Entry, str]:
    """The entries of a baseline file, each with the line text it shows."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file (write it with corral baseline)") from None
    except OSError as error:
        raise BaselineError(f"{path}: cannot read the baseline: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BaselineError(f"{path}: the baseline is not valid JSON: {error}") from None
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise BaselineError(f"{path}: not a corral baseline (version {VERSION} expected)")
    raw_entries = document.get("entries")
    if not isinstance(raw_entries, list):
        raise BaselineError(f"{path}: not a corral baseline: 'entries' must be a list")
    entries: dict[Entry, str] = {}
    for index, raw in enumerate(raw_entries):
        entry = _entry(raw)
        if entry is None:
            raise BaselineError(
                f"{path}: entry {index} must have a string path, code and fingerprint and an occurrence >= 0"
            )
        entries[entry] = raw.get("text", "") if isinstance(raw.get("text"), str) else ""
    return entries


def _entry(raw: Any) -> Entry | None:
    if not isinstance(raw, dict):
        return None
    path, code, fingerprint, occurrence = (raw.get(name) for name in Entry._fields)
    if not all(isinstance(value, str) and value for value in (path, code, fingerprint)):
        return None
    if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
        return None
    return Entry(str(path), str(code), str(fingerprint), occurrence)


def _write(path: Path, entries: dict[Entry, str]) -> None:
    rows = [{**entry._asdict(), "text": text[:SHOWN_TEXT]} for entry, text in sorted(entries.items())]
    document = json.dumps({"version": VERSION, "entries": rows}, indent=2) + "\n"
    # Written beside and renamed over: an interrupted write never leaves half a baseline.
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(document, encoding="utf-8")
    os.replace(partial, path)


def in_scope(entry: Entry, result: CheckResult, covers_root: bool) -> bool:
    """Whether the run could have reported `entry`: its code ran and its file was checked (a whole-project
    finding's file, such as a compose file, only when the run covered the whole project)."""
    if any(entry.code.startswith(left_out) for left_out in result.not_run):
        return False
    return entry.path in result.results or covers_root


def apply_baseline(
    result: CheckResult,
    entries: dict[Entry, str],
    config: Config,
    covers_root: bool,
    sources: Mapping[str, bytes] | None = None,
) -> Applied:
    new, matched = [], set()
    for entry, finding, _ in keyed(result.findings, config, sources):
        if entry in entries:
            matched.add(entry)
        else:
            new.append(finding)
    fixed = [
        (entry, text)
        for entry, text in sorted(entries.items())
        if entry not in matched and in_scope(entry, result, covers_root)
    ]
    return Applied(sorted(new), fixed, len(matched))


def project_baselines(projects: Sequence[Project], flag: str | None) -> dict[Path, tuple[Path, dict[Entry, str]]]:
    """Each project's baseline file (`--baseline FILE`, else its `baseline` key) and entries, by root. A
    baseline keys its entries by paths relative to one project's root: `--baseline` names one project's."""
    if flag is not None and len(projects) > 1:
        roots = ", ".join(str(project.root) for project in projects)
        raise BaselineError(
            f"{flag}: the paths checked belong to {len(projects)} projects ({roots}); a baseline holds one"
            " project's findings: set the baseline key in each project's configuration instead"
        )
    baselines = {}
    for project in projects:
        if not isinstance(project.settings, Config):
            continue  # reported as the project's CRL000; its baseline is never used
        baseline_file = baseline_file_of(project.settings, flag)
        if baseline_file is not None:
            baselines[project.root] = (baseline_file, read_baseline(baseline_file))
    return baselines


def baseline_file_of(config: Config, flag: str | None) -> Path | None:
    """The baseline a project's run is judged against: `--baseline FILE`, else its `baseline` key, else none."""
    return Path(flag) if flag else config.root / config.baseline if config.baseline else None


def report_against(
    baseline_file: Path,
    entries: dict[Entry, str],
    result: CheckResult,
    config: Config,
    covers_root: bool,
    sources: Mapping[str, bytes] | None = None,
) -> tuple[CheckResult, list[str], bool]:
    """The run with only its findings the baseline does not hold; the notes to print after its output (how
    many it held back, each entry that no longer occurs); and whether an entry no longer occurs (which fails
    the run until the baseline is rewritten). `covers_root`: the paths checked hold the project's root;
    `sources` are files checked from memory (`keyed`)."""
    applied = apply_baseline(result, entries, config, covers_root, sources)
    notes = [
        f"corral: {baseline_file}: fixed: {entry.path} {entry.code} {text!r}:"
        " remove from the baseline by re-running corral baseline"
        for entry, text in applied.fixed
    ]
    if applied.accepted:
        accepted = f"{applied.accepted} finding{'s' if applied.accepted != 1 else ''}"
        notes.insert(0, f"corral: {accepted} in the baseline {baseline_file} not shown")
    return result._replace(findings=applied.new, stale_baseline=len(applied.fixed)), notes, bool(applied.fixed)


def baseline_command(paths: list[str], config_file: str | None, output: str | None) -> int:
    """`corral baseline [PATH...]`: write every current finding under PATH into the baseline of its project.
    Entries the run could not have reported (files the paths do not cover, codes `select` leaves out) are
    kept."""
    import sys

    from corral.gates.engine.projects import check_projects, find_projects

    projects = find_projects(paths, config_file)
    if output is not None and len(projects) > 1:
        raise BaselineError(f"--output {output}: the paths checked belong to {len(projects)} projects; leave it out")

    def write(project: Project, config: Config, result: CheckResult) -> CheckResult:
        if output:
            target = Path(output)
        elif config.baseline:
            target = config.root / config.baseline
        else:  # one project: where the command runs, as always; several: each in its own root
            target = Path(DEFAULT_BASELINE) if len(projects) == 1 else config.root / DEFAULT_BASELINE
        entries: dict[Entry, str] = {}
        if target.exists():  # what this run could not have reported (other paths, codes `select` left out) stays
            entries = {
                entry: text
                for entry, text in read_baseline(target).items()
                if not in_scope(entry, result, project.covers_root)
            }
        entries.update((entry, text) for entry, _, text in keyed(result.findings, config))
        try:
            _write(target, entries)
        except OSError as error:
            raise BaselineError(f"{target}: cannot write the baseline: {error.strerror or error}") from None
        count = len(entries)
        print(f"corral: wrote {count} {'entry' if count == 1 else 'entries'} to {target}", file=sys.stderr)
        return result

    result = check_projects(projects, lambda config: config, finish=write)
    from corral.gates.engine.projects import config_errors

    for finding in config_errors(result):
        print(f"corral: {finding.message}", file=sys.stderr)
    return 2 if config_errors(result) else 0
