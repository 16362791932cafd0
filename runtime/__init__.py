"""corral.runtime: a minimal job runtime whose workers are bounded, time-limited and stoppable.

Declare queues and job kinds, build a :class:`Runtime`, ``async with runtime:``, then
``await runtime.enqueue(...)``. Background plumbing that is not a job goes through :func:`detach`.
"""

from corral.runtime.declarations import JobContext, Queue
from corral.runtime.enqueueing import JobRequest
from corral.runtime.errors import (
    BudgetError,
    ConfigError,
    CorralRuntimeError,
    Discard,
    JobArgumentError,
    Retry,
    StoreUnavailable,
    UnknownJobKind,
)
from corral.runtime.infra import detach
from corral.runtime.runtime import Runtime
from corral.runtime.stores.protocol import Enqueued
from corral.runtime.waiters import JobStatus

__all__ = [
    "BudgetError",
    "ConfigError",
    "CorralRuntimeError",
    "Discard",
    "Enqueued",
    "JobArgumentError",
    "JobContext",
    "JobRequest",
    "JobStatus",
    "Queue",
    "Retry",
    "Runtime",
    "StoreUnavailable",
    "UnknownJobKind",
    "detach",
]
