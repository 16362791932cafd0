"""Project root discovery (the nearest `corral.toml` or `pyproject.toml` with `[tool.corral]`) and the
configuration: its keys, defaults and validation.

Every key is declared once in `KEYS`, in kebab-case (ruff's convention); an unknown key or a value of the wrong
type is a `ConfigError` naming the key and the file (with the nearest known keys), because a misspelt key that
silently did nothing would let code through. A key's old spelling (`RENAMED_KEYS`) still reads, with a warning.
The `infra` and `tests` globs are gitignore patterns, matched by `pathspec`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathspec import PathSpec

DEFAULT_INFRA = ("**/infra/**",)
# A file above this many bytes is not read (CRL001): a generated blob, or a link to a device.
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024
# `**/tests.py`: a Django app's own test module.
DEFAULT_TESTS = ("tests/**", "**/tests/**", "**/tests.py", "**/test_*.py", "**/*_test.py", "**/conftest.py")


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """Report on stderr, once per process, what does not stop a run (a deprecated key, a glob that matches no
    file): stdout stays the findings, which CI parses."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"corral: warning: {message}", file=sys.stderr)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'a' or 'b'?)` for the choices nearest a misspelt `word`; empty when none is near."""
    import difflib

    near = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(choice) for choice in near)}?)" if near else ""


def _string_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def _globs(value: Any) -> tuple[str, ...] | None:
    """gitignore patterns. A line gitignore reads as no pattern (blank, a `#` comment, a lone `/`) would silently
    match nothing, so it is refused like one pathspec cannot read."""
    globs = _string_list(value)
    if globs is None or not all(glob.strip("/ ") for glob in globs):
        return None
    try:
        patterns = glob_spec(globs).patterns
    except ValueError:  # pathspec's error for a pattern it cannot read
        return None
    return globs if len(patterns) == len(globs) and all(pattern.include is not None for pattern in patterns) else None


def _qualified_names(value: Any) -> tuple[str, ...] | None:
    names = _string_list(value)
    if names is None or not all(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", name) for name in names):
        return None
    return names


def _folders(value: Any) -> tuple[str, ...] | None:
    """Folders below the root: relative, `/`-separated, never climbing out of it."""
    folders = _string_list(value)
    if folders is None or not all(
        folder and not folder.startswith("/") and ".." not in folder.split("/") for folder in folders
    ):
        return None
    return tuple(folder.strip("/") for folder in folders)


def _boolean(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _fraction(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1:
        return float(value)
    return None


def _code_selectors(value: Any) -> tuple[str, ...] | None:
    """Rule families or codes (`CRL1`, `CRL401`); which exist is checked against the code table by the engine,
    which owns it."""
    selectors = _string_list(value)
    if not selectors or not all(re.fullmatch(r"CRL\d{1,3}", selector) for selector in selectors):
        return None
    return tuple(sorted(set(selectors)))


def _relative_file(value: Any) -> str | None:
    """A file below the root, `/`-separated."""
    if isinstance(value, str) and value and not value.startswith("/") and ".." not in value.split("/"):
        return value
    return None


class _Key(NamedTuple):
    attribute: str
    parse: Callable[[Any], Any]
    expected: str


GLOBS = "a list of glob strings (gitignore patterns)"
KEYS: dict[str, _Key] = {
    "infra": _Key("infra", _globs, GLOBS),
    "tests": _Key("tests", _globs, GLOBS),
    "extend-spawners": _Key("extend_spawners", _qualified_names, "a list of dotted names like 'gevent.spawn'"),
    "extend-network": _Key("extend_network", _qualified_names, "a list of dotted names like 'stripe.Charge.create'"),
    "strict": _Key("strict", _boolean, "true or false"),
    "max-conns": _Key("max_conns", _positive_int, "a positive integer"),
    "processes": _Key("processes", _positive_int, "a positive integer"),
    "reserve": _Key("reserve", _fraction, "a number in (0, 1]"),
    "kubernetes-manifests": _Key("kubernetes_manifests", _folders, "a list of folders relative to the root"),
    "select": _Key("select", _code_selectors, "a non-empty list of rule families or codes like 'CRL1', 'CRL401'"),
    "baseline": _Key("baseline", _relative_file, "a file relative to the root, like 'corral-baseline.json'"),
    "max-file-size": _Key("max_file_size", _positive_int, "a positive number of bytes"),
}
# Keys once spelled in snake_case: the old spelling still reads, with a deprecation warning, so a project's
# settings keep working across the rename.
RENAMED_KEYS = {"max_conns": "max-conns"}


class Config(NamedTuple):
    """The settings one run of the gate uses. `root` anchors every glob and every reported path."""

    root: Path
    source: Path | None = None
    infra: tuple[str, ...] = DEFAULT_INFRA
    tests: tuple[str, ...] = DEFAULT_TESTS
    extend_spawners: tuple[str, ...] = ()
    extend_network: tuple[str, ...] = ()
    strict: bool = False
    max_conns: int | None = None
    # None: the deployment files say, else 1 (`rules.connection_budget`).
    processes: int | None = None
    reserve: float = 0.5
    kubernetes_manifests: tuple[str, ...] = ()
    # Empty: every rule runs. Families or codes otherwise; the engine's own CRL0 always runs.
    select: tuple[str, ...] = ()
    baseline: str | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    # Settings named by `--config FILE`: every file under the root is this project's, folders with a
    # configuration of their own included (as ruff's `--config`); discovered settings stop at such a folder.
    whole_tree: bool = False
    # The keys the table sets: only globs someone wrote are warned about when they match no file.
    configured: frozenset[str] = frozenset()

    def fingerprint(self) -> str:
        """What the cached results depend on besides a file's content."""
        settings = {name: getattr(self, key.attribute) for name, key in KEYS.items()}
        settings["root"] = str(self.root)
        settings["whole_tree"] = self.whole_tree
        import hashlib
        import json

        return hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=12).hexdigest()

    def is_infra(self, relpath: str) -> bool:
        return glob_spec(self.infra).match_file(relpath)

    def is_test(self, relpath: str) -> bool:
        return glob_spec(self.tests).match_file(relpath)

    def unmatched_globs(self, relpaths: Iterable[str]) -> list[tuple[str, str]]:
        """(key, glob) for each glob the table sets that matches none of `relpaths` (a negation: whose pattern
        matches none), in the table's order."""
        relpaths = list(relpaths)
        return [
            (name, glob)
            for name in ("infra", "tests")
            if name in self.configured
            for glob in getattr(self, KEYS[name].attribute)
            if not any(map(glob_spec((glob.removeprefix("!"),)).match_file, relpaths))
        ]


@lru_cache(maxsize=64)
def glob_spec(globs: tuple[str, ...]) -> PathSpec[Any]:
    """The gitignore semantics of `globs`, relative to the root: a pattern with no `/` (but perhaps a trailing
    one) matches at any depth, one with a `/` from the root; `dir/` (or `dir`) matches everything below the folder;
    `**` spans folders, `*`, `?` and `[ab]` stay within one; the last pattern a path matches decides, so a
    `!pattern` takes back what an earlier one matched."""
    # Loaded when a file is judged: a run answered wholly from the cache needs no glob.
    from pathspec import PathSpec

    # PathSpec, not GitIgnoreSpec: that one lets a pattern matching the file win over a later folder's
    # negation (git cannot re-include below an excluded folder), so `!app/infra/legacy/` would not take back.
    return PathSpec.from_lines("gitignore", globs)


# The files that hold corral's settings, in the order they win when one folder has both (as ruff prefers
# `ruff.toml` over `pyproject.toml`): a `corral.toml` always counts, a `pyproject.toml` only with a
# `[tool.corral]` table.
CONFIG_FILES = ("corral.toml", "pyproject.toml")


def find_project_config(start: Path) -> Path | None:
    """The nearest `corral.toml`, or `pyproject.toml` with a `[tool.corral]` table, at or above `start`: the
    configuration that judges a file there, whose folder is its project root."""
    return nearest_config(str(start if _is(start, Path.is_dir) else start.parent))


def nearest_config(directory: str, known: dict[str, Path | None] | None = None) -> Path | None:
    """`find_project_config` of a folder; `known` memoises the answer per folder over one run (a monorepo's
    files share few folders, and each file's is asked)."""
    looked_at: list[str] = []
    found: Path | None = None
    current = directory
    while known is None or current not in known:
        looked_at.append(current)
        found = _config_in(current)
        parent = os.path.dirname(current)
        if found is not None or parent == current:
            break
        current = parent
    else:
        found = known[current]
    if known is not None:
        known.update(dict.fromkeys(looked_at, found))
    return found


def _config_in(directory: str) -> Path | None:
    """The configuration file of `directory` itself, if it has one. An unreadable or invalid `pyproject.toml`
    counts as one: reading it reports the error rather than judging its files by a configuration further up."""
    dedicated, pyproject = (os.path.join(directory, name) for name in CONFIG_FILES)
    # os.path, not pathlib: asked for every folder of a run's files.
    if os.path.isfile(dedicated):
        return Path(dedicated)
    if os.path.isfile(pyproject):
        try:
            table = _read_toml(Path(pyproject)).get("tool", {}).get("corral")
        except ConfigError:
            return Path(pyproject)
        if table is not None:
            return Path(pyproject)
    return None


def shadowed_table(source: Path) -> Path | None:
    """The `pyproject.toml` beside a `corral.toml` whose `[tool.corral]` table the `corral.toml` keeps from
    being read, if there is one: said as a warning, since an edit there would do nothing."""
    pyproject = source.with_name(CONFIG_FILES[1])
    if source.name != CONFIG_FILES[0] or not os.path.isfile(pyproject):
        return None
    try:
        return pyproject if "corral" in _read_toml(pyproject).get("tool", {}) else None
    except ConfigError:
        return None  # not a configuration that could judge anything


def _is(path: Path, test: Callable[[Path], bool]) -> bool:
    """`path.is_dir()` / `is_file()`, False where the path cannot even be looked at (no permission)."""
    try:
        return test(path)
    except OSError:
        return False


def _read_toml(path: Path) -> dict[str, Any]:
    # Loaded only when there is a file to read: most runs of a project without settings never need it.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    try:
        with path.open("rb") as handle:
            document: dict[str, Any] = tomllib.load(handle)
            return document
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None


def load_config(paths: Sequence[str], config_file: str | None = None) -> Config:
    """Find the root and settings for checking `paths` (or read them from `config_file`): those of the first
    path; `engine.projects` gives every path its own."""
    if config_file is not None:
        return read_config_file(Path(config_file).resolve(), shown=config_file)._replace(whole_tree=True)
    given = paths[0] if paths else "."
    first = resolved(given)
    source = find_project_config(first)
    return read_config_file(source) if source is not None else default_config(first)


def resolved(given: str) -> Path:
    """`given` made absolute with its links followed; a link loop is judged where it stands."""
    try:
        return Path(given).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(given))


def default_config(path: Path) -> Config:
    """The settings of a path no configuration file covers: the defaults, rooted where its files are judged by
    their place below the folder the command runs in (pre-commit and editors name single files, and
    `app/infra/x.py` named alone is still infra), else below the path."""
    here = Path.cwd().resolve()
    if path == here or here in path.parents:
        return Config(root=here)
    return Config(root=path if _is(path, Path.is_dir) else path.parent)


def read_config_file(source: Path, shown: str | None = None) -> Config:
    """The settings in `source` (a `pyproject.toml`'s `[tool.corral]`, a `corral.toml`'s top level), rooted at
    its folder."""
    if not _is(source, Path.is_file):
        raise ConfigError(f"{shown or source}: no such config file")
    document = _read_toml(source)
    if source.name == "pyproject.toml":
        table = document.get("tool", {}).get("corral", {})
    else:
        table = document.get("tool", {}).get("corral", document)
    return config_from_table(table, root=source.parent, source=source)


def _unknown_key_hint(spelling: str, value: Any) -> str:
    """The nearest keys (the kebab-case one for a snake_case spelling); for a nested table of corral's own keys
    (`[tool.corral.lint]`, as ruff spells its tables), that they go in `[tool.corral]` itself; else every key."""
    if isinstance(value, dict):
        own = [name for name in value if name in KEYS or name in RENAMED_KEYS]
        if own:
            return f" (its keys belong in [tool.corral] itself: {', '.join(own)})"
    kebab = spelling.replace("_", "-")
    if kebab in KEYS:  # the snake_case spelling of a key: that key, not also its near neighbours
        return f" (did you mean '{kebab}'?)"
    return did_you_mean(spelling, KEYS) or f" (known keys: {', '.join(sorted(KEYS))})"


def config_from_table(table: Any, *, root: Path, source: Path | None) -> Config:
    where = str(source) if source is not None else "configuration"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.corral] must be a table")
    values: dict[str, Any] = {}
    spellings: dict[str, str] = {}
    settings: dict[str, Any] = table  # TOML's keys are strings
    for spelling, raw in settings.items():
        name = RENAMED_KEYS.get(spelling, spelling)
        key = KEYS.get(name)
        if key is None:
            raise ConfigError(f"{where}: [tool.corral] unknown key '{spelling}'{_unknown_key_hint(spelling, raw)}")
        if name in spellings:
            raise ConfigError(
                f"{where}: [tool.corral] sets '{name}' twice, as '{spellings[name]}' and '{spelling}'; keep '{name}'"
            )
        spellings[name] = spelling
        if spelling != name:
            warn(f"{where}: [tool.corral] key '{spelling}' is deprecated; spell it '{name}'")
        value = key.parse(raw)
        if value is None:
            raise ConfigError(f"{where}: [tool.corral] key '{spelling}' must be {key.expected}, got {raw!r}")
        values[key.attribute] = value
    return Config(root=root, source=source, configured=frozenset(spellings), **values)
