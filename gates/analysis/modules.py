"""Other modules of the project: located by dotted name under the root, parsed (never imported), memoised.

A rule that needs a value or a declaration from another project module (a `settings.py` constant, a
`Queue` imported from `app/queues.py`) asks a `ProjectModules` for it. Every file it reads, and every
candidate path it probes and finds missing, is recorded as a dependency of the file being checked, so a
cached result is served only while those files are unchanged (see `cache.py`).

Where a module is looked for: `a/b.py`, `a/b/__init__.py`, under the checked file's package root first
(`discovery.package_root`: `apps/api/` for `apps/api/proj/tasks.py`, a monorepo's service), then under the
project root, then under `src/`. A module is named from its own package root (`proj.tasks`), so a name
another file imports and the name of the definition it reaches agree.

`ProjectModules.origins` follows a name re-exported by project modules (`from app.infra.compat import
Thread`, where `compat.py` says `from threading import Thread`) to the names outside the project it stands
for, with where each module re-exported it. An import the module rebinds afterwards with a top-level
`def` or `class` (`from threading import Thread` then `class Thread(Thread)`) is no re-export: the name is
the project's own (`ModuleInfo.live_sites`).
"""

from __future__ import annotations

import ast
import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from corral.gates.analysis.names import ModuleNames, is_type_checking_test
from corral.gates.config import DEFAULT_MAX_FILE_SIZE
from corral.gates.source.discovery import (
    forget_packages,
    import_folder,
    module_name_for,
    package_markers,
    package_root,
)
from corral.gates.source.parsing import Uncheckable, decode, parse, read_source

# A dependency: the file's modification time (ns), size and content hash; a missing file is (0, -1, "").
Dependency = tuple[int, int, str]
MISSING: Dependency = (0, -1, "")
# A dependency key starting with this marks a project scan ("which files contain these bytes").
SCAN_PREFIX = "*scan:"
# A dependency key starting with this marks a summary of the whole project's bytes, a set of words
# ("*summary:<module>:<function>", the function that computes it from the root): a prefilter that needs
# more than the file's own bytes (the names of the project's transaction wrappers) reads one.
SUMMARY_PREFIX = "*summary:"
# A dependency key starting with this marks a file whose existence alone was read (a package's
# `__init__.py`, which decides what its modules are named); recorded as "1" or "0".
EXISTS_PREFIX = "*exists:"
_SOURCE_ROOTS = ("", "src/")
# How many project modules a re-export is followed through before it is given up (a cycle, say); CRL1's
# origins and CRL401's callees share it.
MAX_REEXPORTS = 8


class ModuleInfo:
    """One parsed project module and its module-level bindings (name -> every statement binding it)."""

    def __init__(
        self, relpath: str, tree: ast.Module, names: ModuleNames | None = None, root: str | None = None
    ) -> None:
        # Named from its package root when the project's `root` is known (see `discovery.package_root`).
        module, is_package = module_name_for(relpath, root)
        self.relpath = relpath
        self.tree = tree
        self.names = names if names is not None else ModuleNames(tree, module, is_package=is_package)
        self.bindings: dict[str, list[ast.AST]] = {}
        self.star_imports: list[str] = []
        self._unconditional: set[ast.AST] | None = None
        self._collect(tree.body)

    def live_sites(self, name: str) -> list[ast.AST]:
        """The module-level bindings of `name` (`Scope.sites_of`) that may still hold once the module has run:
        from the last one a top-level `def`, `class` or import makes outright (nothing under `if`/`try`/`with`/a
        loop) onward. `def f` twice leaves the second; an import then a `class` of the same name leaves the
        class; bindings under `if`/`try` after it all stay candidates. Every binding stays when a function may
        rebind the name (`global`), which runs at no known time."""
        sites = self.names.root.sites_of(name)
        if len(sites) < 2:
            return sites
        if any(scope.declared and scope.declared.get(name) for scope in self.names.scopes.values()):
            return sites
        unconditional = self._unconditional
        if unconditional is None:
            unconditional = self._unconditional = set()
            for statement in self.tree.body:
                if isinstance(statement, (ast.Import, ast.ImportFrom)):
                    unconditional.update(statement.names)
                elif isinstance(statement, _DEFINITIONS):
                    unconditional.add(statement)
        for index in range(len(sites) - 1, 0, -1):
            if sites[index] in unconditional:
                return sites[index:]
        return sites

    def _collect(self, body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    self._bind_target(target, statement.value)
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                self._bind_target(statement.target, statement.value)
            elif isinstance(statement, (ast.AugAssign, ast.Delete)):
                # A name changed after its assignment has no single static value.
                targets = statement.targets if isinstance(statement, ast.Delete) else [statement.target]
                for target in targets:
                    self._bind_target(target, statement)
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bindings.setdefault(statement.name, []).append(statement)
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                self._collect_import(statement)
            elif isinstance(statement, ast.If):
                if not is_type_checking_test(statement.test, self.names, self.names.root):
                    self._collect(statement.body)
                self._collect(statement.orelse)
            elif isinstance(statement, ast.Try):
                for block in (statement.body, *(handler.body for handler in statement.handlers)):
                    self._collect(block)
                self._collect(statement.orelse)
                self._collect(statement.finalbody)
            elif isinstance(statement, (ast.With, ast.For, ast.While)):
                self._collect(statement.body)

    def _bind_target(self, target: ast.expr, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bindings.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            # Unpacking: each name is bound, but not to a value the evaluator can read on its own.
            for element in ast.walk(target):
                if isinstance(element, ast.Name):
                    self.bindings.setdefault(element.id, []).append(target)

    def _collect_import(self, statement: ast.Import | ast.ImportFrom) -> None:
        # An import binds a name like an assignment: a name both imported and assigned has no single value.
        if isinstance(statement, ast.ImportFrom) and any(alias.name == "*" for alias in statement.names):
            self.star_imports.append(self.names.absolute_module(statement.level, statement.module))
            return
        for alias in statement.names:
            name = alias.asname or alias.name.partition(".")[0]
            self.bindings.setdefault(name, []).append(statement)


# Top-level statements (with imports) whose binding replaces what came before: an assignment does not, so
# `def f` then `f = wrap(f)` keeps both, as the scope model reads every binding of a name.
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _Parsed(NamedTuple):
    stamp: tuple[int, int]
    package_root: str
    digest: str
    module: ModuleInfo | None


Key = TypeVar("Key")
Value = TypeVar("Value")


class _BoundedMemo(Generic[Key, Value]):
    """A memo that keeps the most recently used entries up to `limit` bytes of source in all (a parsed
    module takes about a hundred times its source in memory): a project of thousands of modules that
    each open a transaction is parsed as it is read, without every tree kept for the whole run."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: OrderedDict[Key, tuple[Value, int]] = OrderedDict()
        self._size = 0

    def get(self, key: Key) -> Value | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Key, value: Value, size: int) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= old[1]
        self._entries[key] = (value, size)
        self._size += size
        while self._size > self._limit and len(self._entries) > 1:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._size -= evicted

    def clear(self) -> None:
        self._entries.clear()
        self._size = 0


# How much parsed source each memo keeps: a run over Django parses 2.4 MB of it, one over saleor 5.6 MB.
MEMO_SOURCE_BYTES = 8 * 1024 * 1024

# Parsed modules by absolute path, validated by stamp on every use; project scans by (root, needle, whole tree); the
# memos of `run_memo` by name.
_PARSED: _BoundedMemo[str, _Parsed] = _BoundedMemo(MEMO_SOURCE_BYTES)
# Parsed modules by (relpath, text) for one run: what `parsed_module` shares.
_BY_TEXT: _BoundedMemo[tuple[str, str, str | None], ModuleInfo] = _BoundedMemo(MEMO_SOURCE_BYTES)
_SCANS: dict[tuple[str, bytes, bool], tuple[str, ...]] = {}
_RUN_MEMOS: dict[str, dict[Any, Any]] = {}
# Project summaries by (root, name, whole tree): the words and their digest.
_SUMMARIES: dict[tuple[str, str, bool], tuple[frozenset[str], str]] = {}


def forget() -> None:
    """Start a new run: project scans, summaries and run memos are recomputed (parsed modules are
    revalidated by stamp anyway)."""
    _BY_TEXT.clear()
    forget_packages()
    _SCANS.clear()
    _SUMMARIES.clear()
    for memo in _RUN_MEMOS.values():
        memo.clear()


def run_memo(name: str) -> dict[Any, Any]:
    """The memo called `name`, shared by every file this process checks in one run (`forget` empties it).
    For answers about project modules that hold while the files do, as within a run: an answer that read
    other modules keeps what it read (`ProjectModules.recording`), and each file it serves records that
    as its own dependencies (`ProjectModules.replay`)."""
    return _RUN_MEMOS.setdefault(name, {})


def content_digest(data: bytes) -> str:
    import hashlib  # loaded on first use: most files never read another module

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _read(root: str, relpath: str) -> _Parsed | None:
    """The parsed project file `relpath` (None when missing or unreadable), memoised while its stamp and
    the package root it is named from hold."""
    path = os.path.join(root, relpath)
    try:
        status = os.stat(path)
    except OSError:
        return None
    stamp = (status.st_mtime_ns, status.st_size)
    known = _PARSED.get(path)
    if known is not None and known.stamp == stamp and known.package_root == package_root(root, relpath):
        return known
    try:
        data = read_source(path, DEFAULT_MAX_FILE_SIZE)
    except (OSError, Uncheckable):
        return None  # reported where the file is checked itself (CRL001)
    module: ModuleInfo | None
    try:
        module = parsed_module(relpath, decode(data), path, root)
    except (Uncheckable, RecursionError, MemoryError):
        module = None  # an unparsable dependency is reported where it is checked itself (CRL001)
    parsed = _Parsed(stamp, package_root(root, relpath), content_digest(data), module)
    _PARSED.put(path, parsed, len(data))
    return parsed


def parsed_module(relpath: str, text: str, filename: str, root: str | None = None) -> ModuleInfo:
    """The module project file `relpath` holding `text` parses to, parsed once per run and process: a file
    the engine checks and a rule also reads as another file's dependency (a callee's module, a wrapper's)
    is parsed once, whichever needs it first. `root`: the project's, to name the module from its package
    root. Raises what `parse` raises."""
    key = (relpath, text, root)
    known = _BY_TEXT.get(key)
    if known is None:
        known = ModuleInfo(relpath, parse(text, filename), root=root)
        _BY_TEXT.put(key, known, len(text))
    return known


def project_files(root: Path, whole_tree: bool = False) -> tuple[str, ...]:
    """The Python files of the project at `root` (absolute paths), listed once per run: those under it but not
    in a folder below it with a configuration of its own, which is a project of its own (a monorepo's
    service), so that one project's pre-pass never reads another's code. `whole_tree` (`--config FILE`):
    every file under it."""
    memo: dict[tuple[str, bool], tuple[str, ...]] = run_memo("project files")
    files = memo.get((str(root), whole_tree))
    if files is None:
        from corral.gates.config import nearest_config
        from corral.gates.source.discovery import discover

        try:
            found = discover([str(root)])
        except FileNotFoundError:
            found = []
        known: dict[str, Path | None] = {}
        files = memo[(str(root), whole_tree)] = tuple(
            path
            for path in found
            if whole_tree
            or (config := nearest_config(os.path.dirname(path), known)) is None
            or root not in config.parent.parents
        )
    return files


def scan_signature(root: Path, needle: bytes, whole_tree: bool = False) -> tuple[tuple[str, ...], str]:
    """The project files (relative paths) whose bytes contain `needle`, and a digest of that list."""
    key = (str(root), needle, whole_tree)
    found = _SCANS.get(key)
    if found is None:
        matches = []
        prefix = str(root).rstrip(os.sep) + os.sep
        for path in project_files(root, whole_tree):
            try:
                if needle in read_source(path, DEFAULT_MAX_FILE_SIZE):
                    matches.append(path[len(prefix) :].replace(os.sep, "/") if path.startswith(prefix) else path)
            except (OSError, Uncheckable):
                continue
        found = _SCANS[key] = tuple(matches)
    import hashlib

    return found, hashlib.blake2b("\0".join(found).encode(), digest_size=16).hexdigest()


def project_summary(root: Path, name: str, whole_tree: bool = False) -> tuple[frozenset[str], str]:
    """The summary `name` (`<module>:<function>`) of the project under `root`, and its digest; computed
    once per run. The module is named in the key, not imported here, so that a cache entry that depends
    on a summary can be checked by a run that has not loaded the module computing it."""
    key = (str(root), name, whole_tree)
    known = _SUMMARIES.get(key)
    if known is None:
        import importlib

        owner, _, function = name.partition(":")
        words = frozenset(getattr(importlib.import_module(owner), function)(root, project_files(root, whole_tree)))
        known = _SUMMARIES[key] = (words, content_digest("\0".join(sorted(words)).encode()))
    return known


def dependency_holds(root: Path, relpath: str, recorded: Dependency, whole_tree: bool = False) -> bool:
    """Whether a recorded dependency still holds: same stamp, else same content (or still missing). Asked
    once per run for each (file, record): many cached results depend on the same few modules."""
    memo: dict[tuple[str, str, Dependency, bool], bool] = run_memo("dependency holds")
    key = (str(root), relpath, recorded, whole_tree)
    answer = memo.get(key)
    if answer is None:
        answer = memo[key] = _holds(root, relpath, recorded, whole_tree)
    return answer


def _holds(root: Path, relpath: str, recorded: Dependency, whole_tree: bool) -> bool:
    if relpath.startswith(SCAN_PREFIX):
        return scan_signature(root, relpath[len(SCAN_PREFIX) :].encode("latin-1"), whole_tree)[1] == recorded[2]
    if relpath.startswith(EXISTS_PREFIX):
        return os.path.isfile(os.path.join(root, relpath[len(EXISTS_PREFIX) :])) == (recorded[2] == "1")
    if relpath.startswith(SUMMARY_PREFIX):
        try:
            return project_summary(root, relpath[len(SUMMARY_PREFIX) :], whole_tree)[1] == recorded[2]
        except (ImportError, AttributeError):
            return False  # a summary this version of the gate no longer computes
    path = os.path.join(root, relpath)
    try:
        status = os.stat(path)
    except OSError:
        return recorded == MISSING
    if (status.st_mtime_ns, status.st_size) == (recorded[0], recorded[1]):
        return True
    parsed = _read(str(root), relpath)
    return parsed is not None and parsed.digest == recorded[2]


def _candidates(dotted: str, *first: str) -> list[str]:
    """The files that may hold the project module named `dotted`, in the order they are looked for: under
    the folders `first` (the checked file's package root), then the project root and `src/`."""
    if not dotted or any(not part.isidentifier() for part in dotted.split(".")):
        return []
    stem = dotted.replace(".", "/")
    roots = list(dict.fromkeys((*first, *_SOURCE_ROOTS)))
    return [f"{root}{stem}{tail}" for root in roots for tail in (".py", "/__init__.py")]


class ProjectModules:
    """Project modules as seen from one checked file, recording every file that answer depends on."""

    def __init__(
        self, root: Path, own_relpath: str, dependencies: dict[str, Dependency], whole_tree: bool = False
    ) -> None:
        self.root = root
        # `Config.whole_tree`: folders with a configuration of their own are part of the project.
        self.whole_tree = whole_tree
        self.own_relpath = own_relpath
        self.dependencies = dependencies
        self._recordings: list[dict[str, Dependency]] = []
        self._own_root: str | None = None

    def _record(self, relpath: str, dependency: Dependency) -> None:
        if relpath != self.own_relpath:
            self.dependencies[relpath] = dependency
        if self._recordings:
            # The checked file's own path too: an answer kept for other files depends on it.
            self._recordings[-1][relpath] = dependency

    @contextmanager
    def recording(self) -> Iterator[dict[str, Dependency]]:
        """Every file read (or probed and found missing) inside the block, the checked file's own included:
        what an answer computed there depends on, wherever it is used again (see `replay`). Recordings nest:
        what an inner one recorded is recorded by the one around it."""
        recorded: dict[str, Dependency] = {}
        self._recordings.append(recorded)
        try:
            yield recorded
        finally:
            self._recordings.pop()
            if self._recordings:
                self._recordings[-1].update(recorded)

    def replay(self, recorded: dict[str, Dependency]) -> None:
        """Record what an answer computed for another file (inside `recording`) depended on: reusing the
        answer makes this file depend on the same files."""
        for relpath, dependency in recorded.items():
            self._record(relpath, dependency)

    def own_package_root(self) -> str:
        """The checked file's package root, where its absolute imports are looked for first (recorded)."""
        if self._own_root is None:
            self._record_markers(self.own_relpath)
            self._own_root = package_root(self.root, self.own_relpath)
        return self._own_root

    def _record_markers(self, relpath: str) -> None:
        for marker, exists in package_markers(self.root, relpath):
            self._record(EXISTS_PREFIX + marker, (0, 0, "1" if exists else "0"))

    def module(self, dotted: str, near: str | None = None) -> ModuleInfo | None:
        """The project module named `dotted`, or None when no file under the root holds it. `near`: the
        project file that names it as a string (`DJANGO_SETTINGS_MODULE` in `apps/api/manage.py`), whose
        own import root is looked in first: its package root, or a script's own folder."""
        first = [self.own_package_root()]
        if near is not None:
            self._record_markers(near)
            folder, decided_by = import_folder(self.root, near)
            if decided_by is not None:
                marker, exists = decided_by
                self._record(EXISTS_PREFIX + marker, (0, 0, "1" if exists else "0"))
            first.insert(0, folder)
        for candidate in _candidates(dotted, *first):
            found = self.file(candidate)
            if found is not None:
                return found
        return None

    def elsewhere(self, dotted: str) -> list[str]:
        """Project files (relative paths, at most three) that would hold the module `dotted` from a folder
        its lookup does not read (another service's package root): named where the module is reported
        missing, so that a name whose file exists is never said to be undefined."""
        if not dotted or any(not part.isidentifier() for part in dotted.split(".")):
            return []
        stem = "/" + dotted.replace(".", "/")
        tails = (stem + ".py", stem + "/__init__.py")
        return [
            relpath
            for relpath in self._by_module_leaf().get(dotted.rpartition(".")[2], ())
            if ("/" + relpath).endswith(tails)
        ][:3]

    def _by_module_leaf(self) -> dict[str, list[str]]:
        """The project's files (relative paths) by the last part of their module name, once per run."""
        memo: dict[tuple[str, bool], dict[str, list[str]]] = run_memo("files by module leaf")
        key = (str(self.root), self.whole_tree)
        index = memo.get(key)
        if index is None:
            index = memo[key] = {}
            prefix = str(self.root).rstrip(os.sep) + os.sep
            for path in project_files(self.root, self.whole_tree):
                if path.startswith(prefix):
                    relpath = path[len(prefix) :].replace(os.sep, "/")
                    folder, _, name = relpath.rpartition("/")
                    leaf = name.rpartition(".")[0]
                    index.setdefault(folder.rpartition("/")[2] if leaf == "__init__" else leaf, []).append(relpath)
        return index

    def source(self, dotted: str) -> bytes | None:
        """The bytes of the project module named `dotted`, unparsed (None when no file holds it), recorded
        as dependencies as `module` records them: for a caller the bytes alone may answer."""
        for candidate in _candidates(dotted, self.own_package_root()):
            path = os.path.join(self.root, candidate)
            try:
                status = os.stat(path)
                data = read_source(path, DEFAULT_MAX_FILE_SIZE)
            except (OSError, Uncheckable):
                self._record(candidate, MISSING)
                continue
            self._record(candidate, (status.st_mtime_ns, status.st_size, content_digest(data)))
            return data
        return None

    def file(self, relpath: str) -> ModuleInfo | None:
        """The module in the project file `relpath`, recorded as a dependency whether it exists or not."""
        parsed = _read(str(self.root), relpath)
        self._record(relpath, MISSING if parsed is None else (*parsed.stamp, parsed.digest))
        if parsed is not None:
            self._record_markers(relpath)  # what the module is named
        return None if parsed is None else parsed.module

    def files_containing(self, needle: bytes) -> tuple[str, ...]:
        """Project files whose bytes contain `needle`; the answer (the list itself) is a dependency."""
        found, digest = scan_signature(self.root, needle, self.whole_tree)
        self._record(SCAN_PREFIX + needle.decode("latin-1"), (0, 0, digest))
        return found

    def summary(self, name: str) -> frozenset[str]:
        """The project summary `name` (see `project_summary`); its digest is a dependency."""
        words, digest = project_summary(self.root, name, self.whole_tree)
        self._record(SUMMARY_PREFIX + name, (0, 0, digest))
        return words

    def origins(self, dotted: str, depth: int = 0) -> list[tuple[str, tuple[str, ...]]] | None:
        """What `dotted` stands for when it names something in a project module: every name outside the
        project it is a re-export of (through the modules' module-level imports and aliases, each candidate
        binding of a name bound several ways), each with where it was re-exported (`relpath:line`, from
        the outermost module in). Empty when it is a definition of the project (a function, a class, any
        other value) or cannot be followed; None when no project module holds it."""
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.module(".".join(parts[:cut]))
            if module is None:
                continue
            name, rest = parts[cut], parts[cut + 1 :]
            root = module.names.root
            sites = module.live_sites(name)
            if depth >= MAX_REEXPORTS or not sites:
                return []
            targets = root.lookup_all(name)
            if len(sites) < len(root.sites_of(name)) and not any(isinstance(site, ast.alias) for site in sites):
                # Rebound after the import (`class Thread(Thread)`): what the live assignments name, if any.
                targets = [
                    target
                    for site in sites
                    if isinstance(site, (ast.Assign, ast.AnnAssign)) and site.value is not None
                    for target in module.names.resolve_all(site.value, root)
                ]
            where = f"{module.relpath}:{getattr(sites[0], 'lineno', 1)}"
            found: list[tuple[str, tuple[str, ...]]] = []
            for target in targets:
                full = ".".join([target, *rest])
                inner = self.origins(full, depth + 1)
                if inner is None:
                    found.append((full, (where,)))
                else:
                    found.extend((origin, (where, *chain)) for origin, chain in inner)
            return found
        return None
