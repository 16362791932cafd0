"""Which project judges each file of a run, and a run over several of them (a monorepo's services).

As ruff does, a file is judged by the nearest configuration above it (`config.find_project_config`): its
folder is the file's project root, which anchors the file's globs and reported path and bounds the project
its whole-project checks (the connection budget, the project model's pre-pass) see. The files of a run are
grouped by that root and each group is checked with its own settings, so `corral check` at a monorepo's top,
the pre-commit hook naming any subset of files in any order and the flake8 plugin agree on every file.
`--config FILE` names the settings of every file instead. A project whose configuration cannot be used is
one CRL000 finding on its configuration file; the other projects still run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import (
    Config,
    ConfigError,
    default_config,
    find_project_config,
    load_config,
    nearest_config,
    read_config_file,
    resolved,
)
from corral.gates.engine.run import CheckResult, check_paths
from corral.gates.findings import Finding
from corral.gates.source.discovery import iter_files


class Project(NamedTuple):
    """The files of a run one configuration judges: its settings, or why they cannot be used."""

    root: Path
    settings: Config | ConfigError
    files: list[str]
    # The paths named that hold its files, as given.
    paths: tuple[str, ...]
    # Whether a path named is at or above the root, so the run sees every file of the project.
    covers_root: bool
    # The configuration file (None: the defaults), where an unusable configuration is reported.
    source: Path | None


def find_projects(paths: Sequence[str], config_file: str | None = None) -> list[Project]:
    """The projects the files under `paths` belong to, ordered by root; with `config_file`, one project
    whose settings it holds (an unusable one raises: the run was told to use it)."""
    named = tuple(paths or ["."])
    if config_file is not None:
        config = load_config(named, config_file)
        files = list(iter_files(named))
        return [Project(config.root, config, files, named, _covers(named, config.root), config.source)]
    known: dict[str, Path | None] = {}
    # By root: its configuration file, its files, the paths named that hold them.
    groups: dict[Path, tuple[Path | None, list[str], dict[str, None]]] = {}
    seen: set[str] = set()
    for shown in named:
        fallback_root = default_config(resolved(shown)).root
        folder: str | None = None
        for file in iter_files([shown]):
            if file in seen:
                continue
            seen.add(file)
            # A walk yields a folder's files together: its configuration is looked up once for them.
            if os.path.dirname(file) != folder:
                folder = os.path.dirname(file)
                source = nearest_config(folder, known)
                root = source.parent if source is not None else fallback_root
                group = groups.setdefault(root, (source, [], {}))
                group[2][shown] = None
            group[1].append(file)
    if not groups:  # nothing to check: the project of the first path says so (with its settings checked)
        first = resolved(named[0])
        source = find_project_config(first)
        groups[source.parent if source is not None else default_config(first).root] = (source, [], {named[0]: None})
    projects = []
    for root, (source, files, holding) in sorted(groups.items()):
        settings: Config | ConfigError
        try:
            settings = read_config_file(source) if source is not None else Config(root=root)
        except ConfigError as error:
            settings = error
        projects.append(Project(root, settings, files, tuple(holding), _covers(tuple(holding), root), source))
    return projects


def _covers(paths: Sequence[str], root: Path) -> bool:
    return any((path := resolved(given)) == root or path in root.parents for given in paths)


def check_projects(
    projects: Sequence[Project],
    adjust: Callable[[Config], Config],
    *,
    use_cache: bool = True,
    finish: Callable[[Project, Config, CheckResult], CheckResult] | None = None,
) -> CheckResult:
    """Each project's files checked with its settings (after `adjust`, the command line's overrides), its
    whole-project checks once, then `finish` (a baseline); one project's result as it is, several combined."""
    results = []
    for project in projects:
        try:
            if isinstance(project.settings, ConfigError):
                raise project.settings
            config = adjust(project.settings)
            result = check_paths(project.paths, config, use_cache=use_cache, files=project.files)
        except ConfigError as error:
            if len(projects) == 1:
                raise  # the only project: nothing else can run, the command reports the error itself
            results.append(unusable_project(project, error))
            continue
        results.append(finish(project, config, result) if finish is not None else result)
    return results[0] if len(results) == 1 else combined(results)


def unusable_project(project: Project, error: ConfigError) -> CheckResult:
    """A project whose settings cannot be used: one CRL000 finding on its configuration file."""
    from corral.gates.rules.base import EngineCodes

    where = project.source.name if project.source is not None else "."
    count = len(project.files)
    message = f"config error: {error}; corral cannot check the {count} file{'s' if count != 1 else ''} of this project"
    finding = Finding(where, 1, 1, EngineCodes.CONFIG_ERROR, message)
    return CheckResult(project.root, 0, [finding], {}, {}, unusable=True)


def config_errors(result: CheckResult) -> list[Finding]:
    """The CRL000 findings of projects whose settings could not be used."""
    return [finding for part in result.projects if part.unusable for finding in part.findings]


def combined(results: Sequence[CheckResult]) -> CheckResult:
    """Several projects' results as one run's: every file and finding, each project's report sections one
    after another, and what `select` left out anywhere. `root` is the folder holding every project."""
    roots = [str(result.root) for result in results]
    reports: dict[str, Any] = {}
    for result in results:
        for name, section in result.reports.items():
            reports.setdefault(name, []).extend(section)
    return CheckResult(
        root=Path(os.path.commonpath(roots)),
        files=sum(result.files for result in results),
        findings=[finding for result in results for finding in result.findings],
        results={},
        reports=reports,
        not_run=tuple(sorted({left_out for result in results for left_out in result.not_run})),
        projects=tuple(results),
        stale_baseline=sum(result.stale_baseline for result in results),
    )
