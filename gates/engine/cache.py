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
import time
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import Config
from corral.gates.findings import Finding

CACHE_DIR = ".corral_cache"
# 2: facts are typed records, each stored in its own JSON form; 3: the project checks' output is kept.
# 4: SQLAlchemy engines declared at module level are facts (their pools join the connection budget).
# 5: findings carry where their code ends, and columns count characters.
# 6: one small array per path, dependency records in one shared table.
FORMAT = 6
# `analysis.modules.SUMMARY_PREFIX` and `MISSING`, spelled here so that a warm run need not load that module.
SUMMARY_PREFIX = "*summary:"
MISSING = (0, -1, "")
# A file modified this close to a run's start (or after it) may have been read before its change: file
# systems stamp modification times from a coarse clock.
_CLOCK_MARGIN_NS = 2_000_000_000


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
# A served result with no finding, no fact and no dependency.
_NOTHING_FOUND = FileResult()


class Cache:
    """Each path's last stamp, result key and result, so an untouched file is not even read.

    The file holds one entry per path, a small array: `[mtime ns, size, key]` for a result with no
    finding, no fact and no dependency (most files), else `[mtime ns, size, key, findings, facts]` and, when
    the result depends on other files, a last item listing indices into the file's one table of dependency
    records (`[name, mtime ns, size, content hash]`), which many results share and a run checks once each."""

    def __init__(
        self,
        file: Path,
        entries: dict[str, Any],
        dependencies: list[Any],
        root: Path,
        project: Any = None,
        whole_tree: bool = False,
        summaries: dict[str, Any] | None = None,
    ) -> None:
        self.file = file
        # Before any file is read: what changed after it may not be in what this run computed.
        self.opened_at = time.time_ns()
        self.root = root
        self.whole_tree = whole_tree
        self.entries = entries
        self.dependencies = dependencies
        self.project = project
        self.summaries = summaries or {}
        self._project_stamps: str | None = None
        # This run's entries: served ones as they were read (their indices into `dependencies`), new ones
        # with their dependency records themselves.
        self.used: dict[str, list[Any]] = {}
        self.new_dependencies: dict[str, dict[str, tuple[int, int, str]]] = {}
        self.changed = False
        # Set for a run over the whole project: the project summaries a cached result depends on are then
        # checked after the walk, and only when some file was not served from the cache (`run.check_paths`),
        # since a summary is a function of the project's files alone.
        self.defer_summaries = False
        self._checked_records: dict[int, tuple[str, tuple[int, int, str], bool]] = {}
        self._held_sets: dict[tuple[int, ...], dict[str, tuple[int, int, str]] | None] = {}
        # Served results that hold nothing but the same dependencies are one object.
        self._bare_results: dict[tuple[int, ...], FileResult] = {}

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
            with open(file, "rb") as handle:
                document = json.loads(handle.read())
            entries, dependencies = document["files"], document["dependencies"]
            if not isinstance(entries, dict) or not isinstance(dependencies, list):
                raise ValueError(file)
            project, summaries = document.get("project"), document.get("summaries")
            if not isinstance(summaries, dict):
                summaries = None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            entries, dependencies, project, summaries = {}, [], None, None
        return cls(file, entries, dependencies, config.root, project, config.whole_tree, summaries)

    def __len__(self) -> int:
        return len(self.entries)

    def key(self, relpath: str, data: bytes) -> str:
        import hashlib

        digest = hashlib.blake2b(data, digest_size=16)
        digest.update(b"\0" + relpath.encode("utf-8", "surrogateescape"))
        return digest.hexdigest()

    def key_if_unchanged(self, relpath: str, stamp: Stamp) -> str | None:
        """The key recorded for `relpath` when its stamp is the one recorded with it."""
        entry = self.entries.get(relpath)
        if isinstance(entry, list) and len(entry) >= 3 and entry[0] == stamp[0] and entry[1] == stamp[1]:
            return str(entry[2])
        return None

    def lookup(self, relpath: str, key: str) -> FileResult | None:
        """The result stored for `relpath` with this key, while every dependency it records holds."""
        entry = self.entries.get(relpath)
        if not isinstance(entry, list) or len(entry) < 3 or entry[2] != key:
            return None
        if len(entry) == 3:
            return _NOTHING_FOUND  # most files: read back without building anything
        try:
            findings, facts, *rest = entry[3:]
            indices = tuple(rest[0]) if rest else ()
            dependencies = self._dependencies_if_held(indices) if indices else {}
            if dependencies is None:
                return None
            if not findings and not facts and indices in self._bare_results:
                return self._bare_results[indices]
            result = _result(relpath, findings, facts, dependencies)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            return None  # an entry from a damaged cache file is recomputed
        if not findings and not facts:
            self._bare_results[indices] = result
        return result

    def _dependencies_if_held(self, indices: tuple[int, ...]) -> dict[str, tuple[int, int, str]] | None:
        """The dependency records at `indices` of the file's table, None when one no longer holds; asked once
        per run for each set (many results share theirs), each record checked once."""
        if indices in self._held_sets:
            return self._held_sets[indices]
        records: dict[str, tuple[int, int, str]] = {}
        for index in indices:
            name, known, holds = self._checked_record(index)
            if not holds:
                self._held_sets[indices] = None
                return None
            records[name] = known
        self._held_sets[indices] = records
        return records

    def _record(self, index: int) -> tuple[str, tuple[int, int, str]]:
        """Dependency record `index` of the file's table: its name and (mtime ns, size, content hash)."""
        name, mtime, size, digest = self.dependencies[index]
        if not isinstance(name, str) or index < 0:
            raise TypeError(name)
        return name, (int(mtime), int(size), str(digest))

    def _checked_record(self, index: int) -> tuple[str, tuple[int, int, str], bool]:
        """Record `index` and whether it still holds, checked once per run. A summary checked after the walk
        needs no check here; a file record is settled by its stamp, or by its absence, without the module
        that reads and hashes files, as long as that is the answer."""
        checked = self._checked_records.get(index)
        if checked is None:
            name, known = self._record(index)
            summary = name.startswith(SUMMARY_PREFIX)
            if (summary and (self.defer_summaries or self._stored_summary_holds(name, known[2]))) or (
                not name.startswith("*") and _settled_by_stamp(os.path.join(self.root, name), known)
            ):
                holds = True
            else:
                from corral.gates.analysis.modules import dependency_holds

                holds = dependency_holds(self.root, name, known, self.whole_tree)
            checked = self._checked_records[index] = (name, known, holds)
        return checked

    def store(self, relpath: str, stamp: Stamp | None, key: str, result: FileResult, *, hit: bool) -> None:
        if stamp is None:
            return  # nothing to tell the next run's file by
        if hit:
            entry = self.entries[relpath]
            if entry[0] != stamp[0] or entry[1] != stamp[1]:
                # Served by its content: the stamp is new (a checkout rewrote the file as it was).
                entry = [*stamp, *entry[2:]]
                self.changed = True
            self.used[relpath] = entry
            return
        findings, stored, *_ = result_to_json(result)
        bare = not findings and not stored and not result.dependencies
        self.used[relpath] = [*stamp, key] if bare else [*stamp, key, findings, stored]
        if result.dependencies:
            self.new_dependencies[relpath] = result.dependencies
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
        self.entries, self.dependencies, self.project, self.used, self.new_dependencies = {}, [], None, {}, {}
        self._checked_records, self._held_sets, self._bare_results = {}, {}, {}
        self.summaries, self._project_stamps = {}, None
        with contextlib.suppress(OSError):
            self.file.unlink()

    def save(self) -> None:
        """Write this run's entries, and as many older ones again (a run over a few files keeps the rest
        of the project's), atomically, with a new table of the dependency records they name."""
        if not self.changed and (self.summaries or not self.defer_summaries):
            return
        entries = dict(self.used)
        keep = max(2 * len(entries), 5000)
        for relpath, entry in self.entries.items():
            if len(entries) >= keep:
                break
            if relpath not in entries:
                entries[relpath] = entry
        table: dict[tuple[str, tuple[int, int, str]], int] = {}

        def index_of(record: tuple[str, tuple[int, int, str]]) -> int:
            return table.setdefault(record, len(table))

        written: dict[str, list[Any]] = {}
        for relpath, entry in entries.items():
            fresh = self.new_dependencies.get(relpath)
            if fresh is not None:
                entry = [*entry, [index_of(record) for record in fresh.items()]]
            elif len(entry) > 5:
                try:
                    entry = [*entry[:5], [index_of(self._record(index)) for index in entry[5]]]
                except (TypeError, ValueError, IndexError):
                    continue  # an older entry from a damaged file is not written again
            written[relpath] = entry
        dependencies = [[name, *known] for name, known in table]
        if self.defer_summaries:
            summaries = self._project_summaries(written, dependencies)
            if not self.changed and summaries == self.summaries:
                return
            self.summaries = summaries
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.file.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n")
            import json

            temporary = self.file.with_suffix(f".{os.getpid()}.tmp")
            with temporary.open("w", encoding="utf-8") as out:
                document = {
                    "files": written,
                    "dependencies": dependencies,
                    "project": self.project,
                    "summaries": self.summaries,
                }
                json.dump(document, out, separators=(",", ":"))
            os.replace(temporary, self.file)
        except OSError:
            # A read-only checkout still gets checked; it only misses the speed-up next time.
            pass

    def _project_summaries(self, written: dict[str, list[Any]], dependencies: list[Any]) -> dict[str, Any]:
        """Each project summary this run's results hold (`name -> [digest, stamps of the project's files]`),
        for a run over the whole project, so that a front checking one file (flake8) can tell a summary
        still holds from the files' stamps instead of computing it. None is kept when a file of the run may
        have changed while the run read it (modified after the run began: a summary a worker computed
        might predate it), nor when the run's results disagree on a summary."""
        margin = self.opened_at - _CLOCK_MARGIN_NS
        stamps: list[tuple[str, int, int]] = []
        digests: dict[str, set[str]] = {}
        for relpath in self.used:
            entry = written.get(relpath)
            if entry is None or not isinstance(entry[0], int) or entry[0] >= margin:
                return {}
            stamps.append((relpath, entry[0], entry[1]))
            for index in entry[5] if len(entry) > 5 else ():
                name, _, _, digest = dependencies[index]
                if name.startswith(SUMMARY_PREFIX):
                    digests.setdefault(name, set()).add(digest)
        if not digests:
            return {}
        files = _stamps_digest(stamps)
        return {name: [found.pop(), files] for name, found in digests.items() if len(found) == 1}

    def _stored_summary_holds(self, name: str, digest: str) -> bool:
        """Whether summary `name` is the one stored with this digest and the project's files still have
        the stamps it was stored with (each file's stamp read once per process)."""
        stored = self.summaries.get(name)
        if not isinstance(stored, list) or len(stored) != 2 or stored[0] != digest:
            return False
        if self._project_stamps is None:
            from corral.gates.analysis.modules import project_files

            prefix = str(self.root).rstrip(os.sep) + os.sep
            stamps = []
            for path in project_files(self.root, self.whole_tree):
                try:
                    status = os.stat(path)
                except OSError:
                    return False  # not a file the run could have stamped
                stamps.append((path.removeprefix(prefix).replace(os.sep, "/"), status.st_mtime_ns, status.st_size))
            self._project_stamps = _stamps_digest(stamps)
        return bool(stored[1] == self._project_stamps)


def _inputs_digest(inputs: list[tuple[str, str | None]]) -> str | None:
    """One digest of the files a run checked (None when one of them has no key: it was not cacheable)."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for relpath, key in inputs:
        if key is None:
            return None
        digest.update(f"{relpath}\0{key}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _stamps_digest(stamps: list[tuple[str, int, int]]) -> str:
    """One digest of files' stamps (relative path, mtime ns, size), whatever order they come in."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for relpath, mtime, size in sorted(stamps):
        digest.update(f"{relpath}\0{mtime}\0{size}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _settled_by_stamp(path: str, known: tuple[int, int, str]) -> bool:
    """True when a file dependency holds by its stamp alone: unchanged, or still missing."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return known == MISSING
    except OSError:
        return False
    return status.st_mtime_ns == known[0] and status.st_size == known[1]


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
    return _result(relpath, findings, facts, dependencies)


def _result(
    relpath: str, findings: Any, facts: Any, dependencies: dict[str, tuple[int, int, str]] | None
) -> FileResult:
    """A result from its stored parts (the facts kept in their JSON form until read); TypeError for facts that
    are not the JSON form of any."""
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
