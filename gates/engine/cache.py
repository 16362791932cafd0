"""Per-file results cached by content and settings, in `.corral_cache/` under the project root.

A result depends on the file's bytes, its path (infra and test globs, relative imports), the settings and
corral's own version; the key covers all four. A result that read other project files (a constant from
`settings.py`, a queue from `app/queues.py`) also records them (`FileResult.dependencies`: stamp and
content hash) and is served only while each still holds: by stamp, else by content. So a stale entry can
never be served. One JSON file per settings fingerprint keeps a warm run to one read and at most one write.
A result's facts are stored in each record's own JSON form (`rules.base.fact_to_json`), by kind, and read back by the
record type registered for the kind (`rules.FACT_KINDS`).

The whole-project checks' output (findings and report sections) is kept too, with the files it was
computed from (each path and result key): a run whose every result was served from the cache, over the
same files, is answered with it, so a warm run never loads a rule.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import Config
from corral.gates.findings import Finding

CACHE_DIR = ".corral_cache"
# 2: facts are typed records, each stored in its own JSON form; 3: the project checks' output is kept.
# 4: SQLAlchemy engines declared at module level are facts (their pools join the connection budget).
# 5: findings carry where their code ends, and columns count characters.
FORMAT = 5
# `analysis.modules.SUMMARY_PREFIX`, spelled here so that a warm run need not load that module.
SUMMARY_PREFIX = "*summary:"


class FileResult(NamedTuple):
    """What checking one file produced: its findings and the facts whole-project checks read (typed
    records, `rules.base.Fact`, by kind)."""

    findings: tuple[Finding, ...] = ()
    facts: dict[str, list[Any]] | None = None
    # Other project files the result depends on: relpath -> (mtime ns, size, content hash).
    dependencies: dict[str, tuple[int, int, str]] | None = None
    # A result served from the cache keeps its facts in their JSON form until a project check reads them
    # (`typed_facts`): a run answered wholly from the cache never loads the record types or the rules.
    stored_facts: dict[str, list[Any]] | None = None

    def typed_facts(self) -> dict[str, list[Any]] | None:
        """The facts as typed records; DamagedCache when a stored form does not read back."""
        if self.stored_facts is None:
            return self.facts
        try:
            return _facts_from_json(self.stored_facts)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise DamagedCache(f"a cached result's facts do not read back: {error!r}") from error


class DamagedCache(Exception):
    """A cache entry that passed the cheap checks at lookup but does not read back whole: the run is
    done again without the cache."""


Stamp = tuple[int, int]  # a file's modification time (ns) and size
# The stored form of a result with no finding, no fact and no dependency.
_NOTHING_FOUND: list[Any] = [[], {}]


class Cache:
    """Results by key, plus each path's last stamp and key, so an untouched file is not even read."""

    def __init__(
        self,
        file: Path,
        results: dict[str, Any],
        stamps: dict[str, Any],
        root: Path,
        project: Any = None,
        whole_tree: bool = False,
    ) -> None:
        self.file = file
        self.root = root
        self.whole_tree = whole_tree
        self.results = results
        self.stamps = stamps
        self.project = project
        self.used: dict[str, Any] = {}
        self.used_stamps: dict[str, list[Any]] = {}
        self.changed = False
        # Set for a run over the whole project: the project summaries a cached result depends on are then
        # checked after the walk, and only when some file was not served from the cache (`run.check_paths`),
        # since a summary is a function of the project's files alone.
        self.defer_summaries = False

    @classmethod
    def open(cls, config: Config) -> Cache:
        # The rules' own code is part of the name through the package's source stamp: an upgrade, or an
        # edit in a development checkout, never serves results of the old rules.
        import hashlib
        import json

        stamp = f"{FORMAT}-{_source_stamp()}-{config.fingerprint()}"
        name = hashlib.blake2b(stamp.encode(), digest_size=10).hexdigest()
        file = config.root / CACHE_DIR / f"results-{name}.json"
        try:
            document = json.loads(file.read_text("utf-8"))
            results, stamps = document["results"], document["stamps"]
            if not isinstance(results, dict) or not isinstance(stamps, dict):
                raise ValueError(file)
            project = document.get("project")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            results, stamps, project = {}, {}, None
        return cls(file, results, stamps, config.root, project, config.whole_tree)

    def __len__(self) -> int:
        return len(self.results)

    def key(self, relpath: str, data: bytes) -> str:
        import hashlib

        digest = hashlib.blake2b(data, digest_size=16)
        digest.update(b"\0" + relpath.encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def key_if_unchanged(self, relpath: str, stamp: Stamp) -> str | None:
        """The key recorded for `relpath` when its stamp is the one recorded with it."""
        known = self.stamps.get(relpath)
        if isinstance(known, list) and len(known) == 3 and (known[0], known[1]) == stamp:
            return str(known[2])
        return None

    def lookup(self, relpath: str, key: str) -> FileResult | None:
        entry = self.results.get(key)
        if entry is None:
            return None
        if entry == _NOTHING_FOUND:
            return FileResult()  # most files: read back without building anything
        try:
            result = result_from_json(relpath, entry)
        except (TypeError, ValueError, AttributeError, KeyError):
            return None  # an entry from a damaged cache file is recomputed
        dependencies = result.dependencies or {}
        # A summary checked after the walk needs no check here (nor the module that checks dependencies).
        checked = {
            name: known
            for name, known in dependencies.items()
            if not (self.defer_summaries and name.startswith(SUMMARY_PREFIX))
        }
        if checked:
            from corral.gates.analysis.modules import dependency_holds

            if not all(dependency_holds(self.root, name, known, self.whole_tree) for name, known in checked.items()):
                return None
        return result

    def store(self, relpath: str, stamp: Stamp | None, key: str, result: FileResult, *, hit: bool) -> None:
        if stamp is not None:
            self.used_stamps[relpath] = [*stamp, key]
            self.changed = self.changed or self.stamps.get(relpath) != self.used_stamps[relpath]
        if hit:
            self.used[key] = self.results[key]
            return
        self.used[key] = result_to_json(result)
        self.changed = True

    def project_output(self, inputs: list[tuple[str, str | None]]) -> tuple[list[Finding], dict[str, Any]] | None:
        """The project checks' findings and reports stored for exactly these files (path, result key)."""
        stored = self.project
        if not isinstance(stored, dict) or stored.get("inputs") != _inputs_digest(inputs):
            return None
        try:
            findings = [Finding(*finding) for finding in stored["findings"]]
            reports = stored["reports"]
        except (KeyError, TypeError):
            return None
        return (findings, reports) if isinstance(reports, dict) else None

    def store_project_output(
        self, inputs: list[tuple[str, str | None]], findings: list[Finding], reports: dict[str, Any]
    ) -> None:
        digest = _inputs_digest(inputs)
        if digest is None:
            return
        import json

        # Stored as the JSON the next run reads back: a report must come back exactly as it was made.
        project = json.loads(
            json.dumps({"inputs": digest, "findings": [list(f) for f in findings], "reports": reports})
        )
        if project != self.project:
            self.project = project
            self.changed = True

    def discard(self) -> None:
        """Forget every stored result (the next run starts cold and writes the file anew)."""
        self.results, self.stamps, self.project, self.used, self.used_stamps = {}, {}, None, {}, {}
        with contextlib.suppress(OSError):
            self.file.unlink()

    def save(self) -> None:
        """Write this run's entries, and as many older ones again (a run over a few files keeps the rest
        of the project's), atomically."""
        if not self.changed:
            return
        results, stamps = dict(self.used), dict(self.used_stamps)
        keep = max(2 * len(results), 5000)
        for relpath, known in self.stamps.items():
            if len(results) >= keep:
                break
            if relpath not in stamps and isinstance(known, list) and len(known) == 3 and known[2] in self.results:
                stamps[relpath] = known
                results[known[2]] = self.results[known[2]]
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.file.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n")
            import json

            temporary = self.file.with_suffix(f".{os.getpid()}.tmp")
            with temporary.open("w", encoding="utf-8") as out:
                document = {"results": results, "stamps": stamps, "project": self.project}
                json.dump(document, out, separators=(",", ":"))
            os.replace(temporary, self.file)
        except OSError:
            # A read-only checkout still gets checked; it only misses the speed-up next time.
            pass


def _inputs_digest(inputs: list[tuple[str, str | None]]) -> str | None:
    """One digest of the files a run checked (None when one of them has no key: it was not cacheable)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for relpath, key in inputs:
        if key is None:
            return None
        digest.update(f"{relpath}\0{key}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def result_to_json(result: FileResult) -> list[Any]:
    """A result in the JSON form the cache stores (and a worker sends back): its findings without their
    path, its facts' JSON form, then its dependencies if any."""
    stored = result.stored_facts if result.stored_facts is not None else _facts_to_json(result.facts)
    entry: list[Any] = [[list(f)[1:] for f in result.findings], stored]
    if result.dependencies:
        entry.append(result.dependencies)
    return entry


def result_from_json(relpath: str, entry: Any) -> FileResult:
    """The result of `relpath` back from `result_to_json`'s form (its facts kept in their JSON form until
    read: `FileResult.typed_facts`); TypeError, ValueError, AttributeError or KeyError for a damaged one."""
    findings, facts, *rest = entry
    dependencies = {name: (int(a), int(b), str(c)) for name, (a, b, c) in (rest[0] if rest else {}).items()}
    if not isinstance(facts, dict) or not all(isinstance(recorded, list) for recorded in facts.values()):
        raise TypeError(facts)
    return FileResult(
        tuple(Finding(relpath, *finding) for finding in findings),
        stored_facts=facts or None,
        dependencies=dependencies or None,
    )


def _facts_to_json(facts: dict[str, list[Any]] | None) -> dict[str, list[Any]]:
    from corral.gates.rules.base import fact_to_json

    return {kind: [fact_to_json(fact) for fact in recorded] for kind, recorded in (facts or {}).items()}


def _facts_from_json(data: dict[str, list[Any]]) -> dict[str, list[Any]] | None:
    """The typed records back; KeyError for a kind no check reads, TypeError or ValueError for a damaged one."""
    if not data:
        return None
    # Only a file whose rules recorded facts needs the record types (and so the rule modules).
    from corral.gates.rules import FACT_KINDS

    return {kind: [FACT_KINDS[kind].from_json(item) for item in recorded] for kind, recorded in data.items()} or None


def _source_stamp() -> str:
    """Modification times of corral's gate modules, and of the runtime's budget arithmetic the CRL3 check
    shares: a cheap stand-in for 'the rules changed'."""
    import hashlib
    import importlib.util

    package = Path(__file__).parents[1]
    stamps: list[str] = []
    for directory, _, names in os.walk(package):
        stamps.extend(
            f"{directory}/{name}:{os.stat(os.path.join(directory, name)).st_mtime_ns}"
            for name in names
            if name.endswith(".py")
        )
    # Found without importing corral.runtime (its package brings asyncio and the stores).
    runtime = importlib.util.find_spec("corral.runtime")
    for location in (runtime.submodule_search_locations or []) if runtime is not None else []:
        budget = os.path.join(location, "budget.py")
        if os.path.exists(budget):
            stamps.append(f"{budget}:{os.stat(budget).st_mtime_ns}")
    return hashlib.blake2b("|".join(sorted(stamps)).encode(), digest_size=8).hexdigest()
