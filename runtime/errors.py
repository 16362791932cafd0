"""The runtime's exception types: every misuse surfaces as one of these, with a message that says what to fix."""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ConfigError",
    "CorralRuntimeError",
    "JobArgumentError",
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
