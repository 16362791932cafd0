"""The runtime's exception types: every misuse surfaces as one of these, with a message that says what to fix.

Also the two a job raises to steer its own outcome, :class:`Discard` and :class:`Retry`: they are not
errors of the runtime, so they derive from ``Exception`` alone.
"""

from __future__ import annotations

import math

__all__ = [
    "BudgetError",
    "ConfigError",
    "CorralRuntimeError",
    "Discard",
    "JobArgumentError",
    "Retry",
    "StoreUnavailable",
    "UnknownJobKind",
]


class CorralRuntimeError(Exception):
    """Base class of every error raised by ``corral.runtime``."""


class ConfigError(CorralRuntimeError, ValueError):
    """A declaration is invalid (bad name, duplicate kind, missing timeout, ...)."""


class BudgetError(ConfigError):
    """Workers plus relay do not fit in the reserved share of ``max_conns``."""


class UnknownJobKind(CorralRuntimeError, LookupError):
    """``enqueue`` named a job kind no queue declares."""


class JobArgumentError(CorralRuntimeError, TypeError):
    """Job arguments (or an event payload) are not JSON, or do not fit the job's signature."""


class StoreUnavailable(CorralRuntimeError):
    """The store cannot be opened (unreadable path, bad URL, ...)."""


class Discard(Exception):
    """Raised by a job: fail it for good now, without a retry; ``reason`` becomes its error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Retry(Exception):
    """Raised by a job: run it again ``after`` seconds from now, without counting an error. The attempt is
    refunded (``max_attempts`` is unaffected); after the runtime's ``max_retries_requested`` such requests
    the job fails for good instead."""

    def __init__(self, *, after: float) -> None:
        if isinstance(after, bool) or not isinstance(after, (int, float)) or not math.isfinite(after) or after < 0:
            raise ValueError(f"Retry(after=...) must be a finite number of seconds >= 0, got {after!r}")
        super().__init__(f"retry requested in {after:g}s")
        self.after = float(after)
