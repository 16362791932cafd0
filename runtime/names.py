"""Validation of the names that end up in SQL and logs: queue, job kind and event topic names."""

from __future__ import annotations

import re

from corral.runtime.errors import ConfigError

__all__ = ["NAME_PATTERN", "check_name"]

# Names are interpolated nowhere (SQL uses bound parameters), but a strict pattern keeps
# logs, CLI output and the static gate's view of declarations unambiguous.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")


def check_name(what: str, name: object) -> str:
    """Return ``name`` if it matches :data:`NAME_PATTERN`, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"invalid {what} name {name!r}: must match {NAME_PATTERN.pattern}")
    return name
