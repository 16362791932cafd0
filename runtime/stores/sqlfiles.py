"""The SQL file loader the SQL stores share: named queries and numbered migrations shipped as ``.sql`` files.

A store package keeps one statement per ``<name>.sql`` file and its schema history in
``migrations/NNNN_<what>.sql`` (several statements, separated by ``;``). Both are read once, when
the store's module is imported, through :mod:`importlib.resources`, so they work from a wheel as
well as from a source tree. Whole-line ``--`` comments are for the reader and are dropped: the
database receives the statement alone (and a ``%`` or a brace in a comment can never be mistaken
for a placeholder or an identifier slot).
"""

from __future__ import annotations

import re
import sys
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = ["read_migrations", "read_queries", "split_statements"]

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def _statement_text(resource: Traversable) -> str:
    """The file's text without its whole-line comments and surrounding blank space."""
    lines = resource.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if not line.lstrip().startswith("--")]
    return "\n".join(kept).strip()


def read_queries(package: str) -> dict[str, str]:
    """Every ``*.sql`` file directly inside ``package``, by file name without ``.sql``: one statement
    each (a trailing ``;`` is dropped, so the text can be sent as it is)."""
    queries: dict[str, str] = {}
    for resource in files(package).iterdir():
        if resource.is_file() and resource.name.endswith(".sql"):
            queries[resource.name.removesuffix(".sql")] = _statement_text(resource).removesuffix(";").rstrip()
    if not queries:
        raise RuntimeError(f"{package} ships no .sql files: the package data is missing from this install")
    return queries


def read_migrations(package: str) -> tuple[tuple[int, str], ...]:
    """``package``'s ``migrations/NNNN_<what>.sql`` files as ``(version, text)`` in version order.
    Versions must run 1, 2, 3... without gaps: a missing file would silently skip a schema step."""
    found: dict[int, str] = {}
    for resource in files(package).joinpath("migrations").iterdir():
        matched = _MIGRATION_NAME.match(resource.name)
        if matched and resource.is_file():
            found[int(matched.group(1))] = _statement_text(resource)
    versions = sorted(found)
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"{package}: migrations must be numbered 1..n without gaps, found {versions}")
    return tuple((version, found[version]) for version in versions)


def _unfinished(statement: str) -> bool:
    """Whether a ``;`` ended ``statement`` inside a body: an open ``$$`` quote (PostgreSQL's function
    bodies) or a SQLite trigger's ``BEGIN`` not yet closed by its ``END``."""
    if statement.count("$$") % 2:
        return True
    return bool(_TRIGGER.match(statement)) and not _TRIGGER_END.search(statement)


_TRIGGER = re.compile(r"^\s*CREATE\s+TRIGGER\b", re.IGNORECASE)
_TRIGGER_END = re.compile(r"\bEND\s*$", re.IGNORECASE)


def split_statements(migration: str) -> list[str]:
    """A migration's statements (``;``-separated; migrations keep ``;`` out of literals; a ``;`` inside
    a ``$$``-quoted function body or a trigger's ``BEGIN ... END`` stays in its statement)."""
    statements: list[str] = []
    pending = ""
    for part in migration.split(";"):
        pending = f"{pending};{part}" if pending else part
        if _unfinished(pending):
            continue
        if pending.strip():
            statements.append(pending.strip())
        pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements
