"""The engine: discover files, prefilter, parse once, run per-file rules, then the registered
whole-project checks (`rules.PROJECT_CHECKS`) on every file's facts.

Per file the work is pure (bytes and settings in, findings and facts out), which is what lets results be
cached by content and files be checked in parallel. The prefilter skips the parse for a file that holds
none of the byte strings any applicable rule needs; such a file is still read and decoded, so an
unreadable or undecodable file is CRL001 whether or not a rule would have looked at it.
"""

from __future__ import annotations

import importlib
import os
import stat
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from corral.gates.config import DEFAULT_MAX_FILE_SIZE, Config, ConfigError, did_you_mean, glob_spec, warn
from corral.gates.engine.cache import Cache, DamagedCache, FileResult, Stamp, result_from_json, result_to_json
from corral.gates.engine.infra.parallel import map_paths
from corral.gates.findings import Finding
from corral.gates.source.deployments import deployment_inputs
from corral.gates.source.discovery import iter_files
from corral.gates.source.parsing import (
    Uncheckable,
    declares_encoding,
    decode,
    read_source,
    too_large,
    unreadable_kind,
)

if TYPE_CHECKING:
    import ast

    from corral.gates.rules.base import Rule

# Workers cost more than they save below this many files; a walk starts them once it has found this many.
PARALLEL_THRESHOLD = 200


@lru_cache(maxsize=8)
def selected_codes(select: tuple[str, ...], where: str = "select") -> frozenset[str] | None:
    """The codes a `select` of families and codes runs (the engine's CRL0 always among them); None: every
    code. A selector that names no family or code is a ConfigError with the nearest ones."""
    if not select:
        return None
    from corral.gates.rules import CODES, FAMILIES

    for selector in select:
        if selector not in CODES and selector not in FAMILIES:
            hint = did_you_mean(selector, [*FAMILIES, *CODES]) or f" (families: {', '.join(FAMILIES)})"
            raise ConfigError(f"{where}: no rule family or code {selector!r}{hint}")
    return frozenset(code for code in CODES if code.startswith(("CRL0", *select)))


def _select_key(config: Config) -> str:
    return f"{config.source or 'configuration'}: [tool.corral] key 'select'"


def not_run(select: tuple[str, ...]) -> tuple[str, ...]:
    """What a `select` leaves out, for the summary: whole families where none of theirs runs, else codes."""
    selected = selected_codes(select)
    if selected is None:
        return ()
    from corral.gates.rules import FAMILIES

    left_out: list[str] = []
    for family, codes in FAMILIES.items():
        skipped = [code for code in codes if code not in selected]
        left_out.extend([family] if len(skipped) == len(codes) else skipped)
    return tuple(left_out)


def _runs(codes: Iterable[str], config: Config) -> bool:
    selected = selected_codes(config.select)
    return selected is None or not selected.isdisjoint(codes)


def _selected(findings: Iterable[Finding], config: Config) -> list[Finding]:
    selected = selected_codes(config.select)
    return [finding for finding in findings if selected is None or finding.code in selected]


def run_project_checks(results: Mapping[str, FileResult], config: Config, reports: dict[str, Any]) -> list[Finding]:
    """Every registered whole-project check whose rule `select` runs on every file's facts, in registry
    order; each may add its section to `reports`."""
    from corral.gates.rules import PROJECT_CHECKS

    facts = {relpath: typed for relpath, result in results.items() if (typed := result.typed_facts())}
    checks = [check for check in PROJECT_CHECKS if _runs(check.rule.codes, config)]
    return _selected([finding for check in checks for finding in check().run(facts, config, reports)], config)


class CheckResult(NamedTuple):
    """The outcome of one run: how many files were checked and every finding, sorted; what `select` left
    out; the bound files were read under (outputs that read a finding's line again keep to it). A run over
    several projects (`engine.projects`) holds each one's result in `projects`; its findings are theirs
    together, each `path` relative to its own project's root."""

    root: Path
    files: int
    findings: list[Finding]
    results: dict[str, FileResult]
    reports: dict[str, Any]
    not_run: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    # The sources checked from memory (stdin), by relative path: outputs read a finding's line from them.
    sources: Mapping[str, bytes] | None = None
    # Baseline entries that no longer occur (they fail the run until the baseline is rewritten).
    stale_baseline: int = 0
    projects: tuple[CheckResult, ...] = ()
    # A project whose settings could not be used: its CRL000 finding is its whole result.
    unusable: bool = False


def relative_path(path: str, root: Path) -> str:
    """`path` relative to the project root, `/`-separated (with `..` for a file outside the root)."""
    prefix = str(root).rstrip(os.sep) + os.sep
    relative = path[len(prefix) :] if path.startswith(prefix) else os.path.relpath(path, root)
    return relative.replace(os.sep, "/")


def rules_for(relpath: str, config: Config) -> list[type[Rule]]:
    # The rules (and `ast`) load on first use: a run answered wholly from the cache never needs them.
    from corral.gates.rules import RULES

    is_infra, is_test = config.is_infra(relpath), config.is_test(relpath)
    return [rule for rule in RULES if rule.applies_to(is_infra=is_infra, is_test=is_test) and _runs(rule.codes, config)]


def check_source(
    relpath: str, data: bytes, config: Config, tree: ast.Module | None = None, *, prefilter: bool = True
) -> FileResult:
    """Every per-file rule's findings for one file. `tree` is an already parsed module (flake8's), if any;
    without `prefilter` every applicable rule runs on the parsed file (what the prefilters are tested by)."""
    try:
        selected_codes(config.select, _select_key(config))
    except ConfigError as error:  # a per-file front (flake8) reports it on the file; `check_paths` stops first
        return FileResult(findings=(unusable_config(relpath, error),))
    try:
        text = decode(data)
    except Uncheckable as problem:
        return FileResult(findings=(uncheckable(relpath, problem),))
    searchable, guide = data, text
    if not data.isascii() or declares_encoding(data):
        # Prefilters and line filters read the words of the file, but Python reads identifiers in the
        # declared encoding and NFKC-normalised: `os.\uff46ork()` (a fullwidth f) and a UTF-7
        # `os.+AGY-ork()` both call os.fork.
        guide = unicodedata.normalize("NFKC", text)
        searchable = guide.encode("utf-8", "surrogatepass")
    from corral.gates.source.prefilter import Source

    source = Source(searchable, relpath, str(config.root))
    rules = tuple(rule for rule in rules_for(relpath, config) if not prefilter or rule.might_match(source, config))
    if not rules:
        return FileResult(dependencies=source.dependencies or None)
    result = _run_rules(relpath, text, guide, config, rules, tree)
    if source.dependencies:
        # What the prefilters read decided which rules ran: the result holds only while that does too.
        result = result._replace(dependencies={**source.dependencies, **(result.dependencies or {})})
    return result


def _run_rules(
    relpath: str, text: str, guide: str, config: Config, rules: tuple[type[Rule], ...], tree: ast.Module | None
) -> FileResult:
    """Run `rules` on the parsed file; `guide` is the normalised text the rules' line filters read. A file
    nested deeper than the recursion limit lets the walks go is checked again with more headroom."""
    try:
        return _rules_on_file(relpath, text, guide, config, rules, tree)
    except RecursionError:
        pass
    from corral.gates.engine.infra.deep_stack import NoDeepStack, call_with_headroom

    try:
        return call_with_headroom(lambda: _rules_on_file(relpath, text, guide, config, rules, tree))
    except (RecursionError, NoDeepStack):
        return FileResult(findings=(uncheckable(relpath, Uncheckable("is nested too deeply to check")),))


def _rules_on_file(
    relpath: str, text: str, guide: str, config: Config, rules: tuple[type[Rule], ...], tree: ast.Module | None
) -> FileResult:
    """`_run_rules` at the running recursion limit: a RecursionError is the caller's."""
    from corral.gates.analysis.context import FileContext
    from corral.gates.analysis.modules import EXISTS_PREFIX, ModuleInfo, parsed_module
    from corral.gates.source.discovery import package_markers

    if "\r" in guide:
        # Python ends a line at a bare carriage return too; the line filters count newlines only.
        guide = guide.replace("\r\n", "\n").replace("\r", "\n")
    try:
        # Parsed once per run: a rule following calls into this file from another reuses the parse.
        root = str(config.root)
        parsed = (
            ModuleInfo(relpath, tree, root=root) if tree is not None else parsed_module(relpath, text, relpath, root)
        )
        context = FileContext(
            relpath=relpath,
            text=guide,
            tree=parsed.tree,
            names=parsed.names,
            config=config,
            is_infra=config.is_infra(relpath),
            is_test=config.is_test(relpath),
        )
        findings = _selected((finding for rule in rules for finding in rule(context).check()), config)
        # The file's module is named from its package root, which the `__init__.py` files above it decide.
        for marker, exists in package_markers(root, relpath):
            context.dependencies[EXISTS_PREFIX + marker] = (0, 0, "1" if exists else "0")
    except Uncheckable as problem:
        return FileResult(findings=(uncheckable(relpath, problem),))
    except MemoryError:
        return FileResult(findings=(uncheckable(relpath, Uncheckable("is nested too deeply to check")),))
    return FileResult(
        findings=tuple(sorted(set(findings))), facts=context.facts or None, dependencies=context.dependencies or None
    )


def uncheckable(relpath: str, problem: Uncheckable) -> Finding:
    message = f"file {problem.reason}; it cannot be checked"
    from corral.gates.rules.base import EngineCodes

    return Finding(relpath, problem.line, problem.col, EngineCodes.UNCHECKABLE, message)


def unusable_config(relpath: str, error: Exception) -> Finding:
    """What a per-file front reports on a file whose settings it cannot use (`corral check` stops instead)."""
    message = f"config error: {error}; corral cannot check this file"
    from corral.gates.rules.base import EngineCodes

    return Finding(relpath, 1, 1, EngineCodes.CONFIG_ERROR, message)


# One file's stamp and cache key (None when uncached), its result, and whether the cache answered.
Outcome = tuple[Stamp | None, str | None, FileResult, bool]
# What every file's check shares in one run; set before the files are checked, inherited by workers.
_RUN: tuple[Config, Cache | None] | None = None


def _prepare(config: Config, cache: Cache | None) -> None:
    global _RUN
    _RUN = (config, cache)


def _shared_by_workers(config: Config) -> None:
    """What every worker would otherwise compute for itself, computed once before they fork: the infra and
    tests globs (loading `pathspec`, ~25 ms a process), and the project summaries the rules `select` runs
    read (CRL401's transaction wrappers: every file of the project read, a few parsed). A summary no file
    turns out to need costs this run its computation, never a finding: only a file whose prefilter or check
    asks for one records it as a dependency."""
    from corral.gates.analysis.modules import project_summary
    from corral.gates.rules import RULES

    glob_spec(config.infra)
    glob_spec(config.tests)
    for name in dict.fromkeys(name for rule in RULES if _runs(rule.codes, config) for name in rule.summaries):
        project_summary(config.root, name, config.whole_tree)


def _check_file(path: str) -> Outcome:
    """One file's outcome: from the cache, or checked."""
    assert _RUN is not None
    config, cache = _RUN
    relpath = relative_path(path, config.root)
    try:
        status = os.stat(path)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(path)
        # A FIFO, a device or a huge file is refused from its status alone, before the cache or a read.
        refused = unreadable_kind(status.st_mode, status.st_size, config.max_file_size)
        if refused is not None:
            return None, None, FileResult(findings=(uncheckable(relpath, refused),)), False
        stamp: Stamp | None = None
        if cache is not None:
            stamp = (status.st_mtime_ns, status.st_size)
            key = cache.key_if_unchanged(relpath, stamp)
            cached = cache.lookup(relpath, key) if key is not None else None
            if key is not None and cached is not None:
                return stamp, key, cached, True
        data = read_source(path, config.max_file_size)
    except Uncheckable as problem:
        return None, None, FileResult(findings=(uncheckable(relpath, problem),)), False
    except OSError as error:
        return None, None, FileResult(findings=(uncheckable(relpath, _unreadable(path, error)),)), False
    if cache is None:
        return None, None, check_source(relpath, data, config), False
    key = cache.key(relpath, data)
    cached = cache.lookup(relpath, key)
    if cached is not None:
        return stamp, key, cached, True
    return stamp, key, check_source(relpath, data, config), False


def _outcome_to_json(outcome: Outcome) -> list[Any]:
    """A worker's outcome for one file as JSON: the result in the form the cache stores it."""
    stamp, key, result, hit = outcome
    return [stamp, key, result_to_json(result), hit]


def _outcome_from_json(path: str, data: Any) -> Outcome:
    """A worker's outcome back, its facts typed at once: a fact that does not read back is a ValueError here
    (the file is checked again in this process), never a damaged cache later."""
    assert _RUN is not None
    stamp, key, entry, hit = data
    result = result_from_json(relative_path(path, _RUN[0].root), entry)
    try:
        facts = result.typed_facts()
    except DamagedCache as damaged:
        raise ValueError(f"a worker's facts for {path} do not read back") from damaged
    stamped = None if stamp is None else (int(stamp[0]), int(stamp[1]))
    return stamped, None if key is None else str(key), result._replace(facts=facts, stored_facts=None), bool(hit)


def _unreadable(path: str, error: OSError) -> Uncheckable:
    if isinstance(error, IsADirectoryError):
        try:
            os.scandir(path).close()
        except OSError as listing:
            return Uncheckable(f"is in a folder that cannot be listed: {listing.strerror or listing}")
        return Uncheckable("is a folder, not a file")
    return Uncheckable(f"cannot be read: {error.strerror or error}")


def check_paths(
    paths: Sequence[str], config: Config, *, use_cache: bool = True, files: Sequence[str] | None = None
) -> CheckResult:
    """Check the Python files under `paths` (or `files`, found under them already) with `config`; the
    whole-project checks run on the result."""
    selected_codes(config.select, _select_key(config))
    # Project scans rules made (which files declare a Celery app...) hold for one run; the module is only
    # loaded when a rule needed it, and a run answered from the cache does not load it.
    modules = sys.modules.get("corral.gates.analysis.modules")
    if modules is not None:
        modules.forget()
    cache = Cache.open(config) if use_cache else None
    root = os.path.realpath(config.root)
    # A path named at or above the root: the run sees every file of the project.
    whole_project = any(
        os.path.realpath(path) == root or root.startswith(os.path.join(os.path.realpath(path), ""))
        for path in paths or ["."]
    )
    if cache is not None:
        cache.defer_summaries = whole_project
    found: Iterable[str] = iter_files(paths or ["."]) if files is None else files
    start_after = PARALLEL_THRESHOLD
    if cache is not None and len(cache):
        found = list(found)
        if len(cache) >= 0.9 * len(found):
            # A warm cache answers faster in this process than workers can start.
            start_after = len(found) + 1
    if start_after == PARALLEL_THRESHOLD:
        # A run the cache does not answer forks its workers from here: the rules load once, before, and
        # every worker inherits them instead of loading them itself.
        importlib.import_module("corral.gates.rules")
    # A cold run checks the first files a walk finds while it looks for the rest.
    outcomes = map_paths(
        _check_file,
        found,
        start_after=start_after,
        initializer=_prepare,
        initargs=(config, cache),
        to_json=_outcome_to_json,
        from_json=_outcome_from_json,
        shared=partial(_shared_by_workers, config),
    )
    if cache is not None and cache.defer_summaries and not all(outcome[3] for outcome in outcomes.values()):
        _recheck_stale_summaries(outcomes, config)
    results: dict[str, FileResult] = {}
    for path in sorted(outcomes):
        stamp, key, result, hit = outcomes[path]
        relpath = relative_path(path, config.root)
        results[relpath] = result
        if cache is not None and key is not None:
            cache.store(relpath, stamp, key, result, hit=hit)
    if not results:
        # As ruff: a run that checked nothing is not a failure, but it must not look like a clean one.
        warn(f"no Python files found under {' '.join(paths or ['.'])}")
    elif whole_project:
        # Only a run over the whole project sees every file a glob could match.
        for key, glob in config.unmatched_globs(results):
            warn(f"{config.source}: [tool.corral] key '{key}': glob '{glob}' matches no file checked")
    findings = [finding for result in results.values() for finding in result.findings]
    # The whole-project checks are a function of every file's result: when each was served from the cache,
    # their output is the one stored with the same files (and no rule module needs loading).
    inputs = [(relpath, outcomes[path][1]) for path, relpath in zip(sorted(outcomes), results, strict=True)]
    # The connection budget also reads the deployment files (compose, manifests, gunicorn.conf.py).
    inputs += deployment_inputs(config.root, config.kubernetes_manifests)
    every_hit = all(outcome[3] for outcome in outcomes.values())
    project = cache.project_output(inputs) if cache is not None and every_hit else None
    if project is None:
        reports: dict[str, Any] = {}
        try:
            project_findings = run_project_checks(results, config, reports)
        except DamagedCache:
            assert cache is not None  # only a cached result can hold facts that do not read back
            cache.discard()
            return check_paths(paths, config, use_cache=use_cache, files=files)
        if cache is not None:
            cache.store_project_output(inputs, project_findings, reports)
    else:
        project_findings, reports = project
    if cache is not None:
        cache.save()
    findings.extend(project_findings)
    return CheckResult(
        config.root, len(outcomes), sorted(findings), results, reports, not_run(config.select), config.max_file_size
    )


def _recheck_stale_summaries(outcomes: dict[str, Outcome], config: Config) -> None:
    """Check again each file served from the cache whose result depends on a project summary that no longer
    holds (some file changed): its prefilter may now admit it."""
    from corral.gates.analysis.modules import SUMMARY_PREFIX, dependency_holds

    for path, (stamp, key, result, hit) in list(outcomes.items()):
        if hit and any(
            name.startswith(SUMMARY_PREFIX) and not dependency_holds(config.root, name, known, config.whole_tree)
            for name, known in (result.dependencies or {}).items()
        ):
            relpath = relative_path(path, config.root)
            try:
                data = read_source(path, config.max_file_size)
            except Uncheckable as problem:
                outcomes[path] = (None, None, FileResult(findings=(uncheckable(relpath, problem),)), False)
                continue
            except OSError as error:
                unreadable = uncheckable(relpath, _unreadable(path, error))
                outcomes[path] = (None, None, FileResult(findings=(unreadable,)), False)
                continue
            outcomes[path] = (stamp, key, check_source(relpath, data, config), False)


def check_sources(pairs: Iterable[tuple[str, bytes]], config: Config) -> CheckResult:
    """In-memory files (relative path, content; an editor's buffer read from stdin), each judged as the file
    at that path, whole-project checks included, as `check_paths` judges those files named alone; no cache.
    Content over `max-file-size` is CRL001, as on disk."""
    selected_codes(config.select, _select_key(config))
    sources = dict(pairs)
    results = {
        relpath: check_source(relpath, data, config)
        if len(data) <= config.max_file_size
        else FileResult(findings=(uncheckable(relpath, too_large(config.max_file_size)),))
        for relpath, data in sources.items()
    }
    findings = [finding for result in results.values() for finding in result.findings]
    reports: dict[str, Any] = {}
    findings.extend(run_project_checks(results, config, reports))
    return CheckResult(
        config.root,
        len(results),
        sorted(findings),
        results,
        reports,
        not_run(config.select),
        config.max_file_size,
        sources,
    )
