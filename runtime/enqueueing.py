"""What one enqueue asks for: its priority, its unique key, and :class:`JobRequest`, one job of a batch.

Owns the checks of ``priority=`` and ``unique=`` (on :meth:`Queue.job <corral.runtime.Queue.job>` as a
kind's default and on every enqueue) and the unique key a job is stored with: a digest of its kind,
the key the caller named (or the arguments' canonical JSON: ``"by-args"``) and, with ``"for"``, the
window of that many seconds the enqueue falls in. The store enforces the key; this module only names it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.runtime.payloads import is_storable_text
from corral.runtime.stores.protocol import PRIORITIES, STATES, UNIQUE_ALWAYS

__all__ = ["BY_ARGS", "JobRequest", "Unique", "UniqueArg", "check_priority", "check_unique", "unique_key"]

BY_ARGS = "by-args"
MAX_UNIQUE_KEY_LENGTH = 255
_UNIQUE_FIELDS = ("key", "states", "for")

UniqueArg = bool | str | Mapping[str, Any]
"""What ``unique=`` takes: True or ``"by-args"`` (the kind and its arguments), a key of the caller's
(per kind), or ``{"key": ..., "states": [...], "for": seconds}`` (each optional); False: not unique."""


@dataclass(frozen=True)
class Unique:
    """A checked ``unique=``: ``key`` None means by the arguments; ``states`` the states in which a job
    holds it; ``period`` (seconds) a window the key is unique within, or None (for ever)."""

    key: str | None
    states: tuple[str, ...]
    period: float | None


def check_priority(what: str, priority: object, error: type[Exception]) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise error(f"{what}: priority must be an integer from 0 to 3 (3 is claimed first), got {priority!r}")
    return priority


def _check_key(what: str, key: object, error: type[Exception]) -> str | None:
    if key == BY_ARGS:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= MAX_UNIQUE_KEY_LENGTH or not is_storable_text(key):
        raise error(
            f"{what}: a unique key must be {BY_ARGS!r} or a non-empty string of at most {MAX_UNIQUE_KEY_LENGTH} "
            f"characters, without NUL or lone surrogates, got {key!r}"
        )
    return key


def _check_states(what: str, states: object, error: type[Exception]) -> tuple[str, ...]:
    if isinstance(states, str) or not isinstance(states, Sequence) or not all(isinstance(s, str) for s in states):
        raise error(f"{what}: unique states must be a list of state names, got {states!r}")
    unknown = [state for state in states if state not in STATES]
    if unknown:
        raise error(f"{what}: unknown unique state(s) {unknown!r}; the states are {', '.join(STATES)}")
    missing = [state for state in UNIQUE_ALWAYS if state not in states]
    if missing:
        raise error(
            f"{what}: unique states must include {', '.join(UNIQUE_ALWAYS)} (a job moves between them on its "
            f"own, so the key cannot be released in one of them); missing {', '.join(missing)}"
        )
    return tuple(state for state in STATES if state in states)


def check_unique(what: str, unique: object, error: type[Exception]) -> Unique | None:
    """``unique=`` checked (``error`` is raised with ``what`` in front); None when the job is not unique."""
    if unique is None or unique is False:
        return None
    if unique is True:
        return Unique(key=None, states=UNIQUE_ALWAYS, period=None)
    if isinstance(unique, str):
        return Unique(key=_check_key(what, unique, error), states=UNIQUE_ALWAYS, period=None)
    if not isinstance(unique, Mapping):
        raise error(
            f"{what}: unique must be True, {BY_ARGS!r}, a key string or a dict with {', '.join(_UNIQUE_FIELDS)}; "
            f"got {unique!r}"
        )
    extra = [name for name in unique if name not in _UNIQUE_FIELDS]
    if extra:
        raise error(f"{what}: unique has unknown field(s) {extra!r}; its fields are {', '.join(_UNIQUE_FIELDS)}")
    period = unique.get("for")
    if period is not None and (
        isinstance(period, bool) or not isinstance(period, (int, float)) or not math.isfinite(period) or period <= 0
    ):
        raise error(f"{what}: unique 'for' must be a positive number of seconds, got {period!r}")
    return Unique(
        key=_check_key(what, unique.get("key", BY_ARGS), error),
        states=_check_states(what, unique.get("states", UNIQUE_ALWAYS), error),
        period=None if period is None else float(period),
    )


def unique_key(unique: Unique, *, kind: str, args_json: str, now: float) -> str:
    """The key a unique job is stored with: a fixed-length digest (index-friendly whatever the arguments)."""
    by_args = None
    if unique.key is None:  # the arguments' canonical JSON: the same arguments in any order are one key
        by_args = json.dumps(json.loads(args_json), sort_keys=True, separators=(",", ":"))
    window = None if unique.period is None else math.floor(now / unique.period)
    named = json.dumps([kind, unique.key, by_args, window], separators=(",", ":"))
    return hashlib.sha256(named.encode("utf-8")).hexdigest()


class JobRequest:
    """One job of :meth:`Runtime.enqueue_many <corral.runtime.Runtime.enqueue_many>`, with the keywords of
    ``enqueue``: ``JobRequest("mail.receipt", order_id=7, priority=2)``."""

    __slots__ = ("args", "delay", "key", "kind", "priority", "unique")

    def __init__(
        self,
        kind: str,
        /,
        *,
        key: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: UniqueArg | None = None,
        **args: Any,
    ) -> None:
        self.kind = kind
        self.key = key
        self.delay = delay
        self.priority = priority
        self.unique = unique
        self.args = args

    def __repr__(self) -> str:
        return f"JobRequest({self.kind!r}, args={self.args!r})"
