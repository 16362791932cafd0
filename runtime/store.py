"""The storage interface: one small, async, claim-oriented :class:`Store` protocol and its records.

The SQLite store (:mod:`corral.runtime.sqlite_store`) is the first implementation; a PostgreSQL
store can implement the same protocol. Every method is one short transaction: no job code ever
runs while a store transaction or connection is held.

Job states: ``waiting`` (new, snoozed or released), ``running`` (claimed, under a lease),
``retrying`` (failed or rescued, runnable again at ``run_at``), ``done`` and ``failed`` (final).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DONE",
    "FAILED",
    "RETRYING",
    "RUNNING",
    "STATES",
    "WAITING",
    "ClaimedJob",
    "Completion",
    "FailedJob",
    "JobState",
    "NewJob",
    "PeriodicSpec",
    "QueueCounts",
    "RelayPass",
    "Route",
    "Store",
]

WAITING = "waiting"
RUNNING = "running"
RETRYING = "retrying"
DONE = "done"
FAILED = "failed"
STATES = (WAITING, RUNNING, RETRYING, FAILED, DONE)


@dataclass(frozen=True)
class NewJob:
    """A job to insert. ``args_json`` is already validated JSON (an object)."""

    queue: str
    kind: str
    args_json: str
    key: str | None
    run_at: float
    max_attempts: int
    lease_seconds: float


@dataclass(frozen=True)
class ClaimedJob:
    """A job this worker now holds. ``token`` identifies the claim: settling a job needs it,
    so a worker that lost its lease cannot settle somebody else's attempt."""

    id: int
    queue: str
    kind: str
    args_json: str
    key: str | None
    attempt: int
    max_attempts: int
    token: int
    enqueued_at: float
    run_at: float


@dataclass(frozen=True)
class Completion:
    job_id: int
    token: int
    result_json: str | None


@dataclass(frozen=True)
class Route:
    """Where the relay sends an event: a job of ``kind`` on ``queue``, payload as arguments."""

    kind: str
    queue: str
    max_attempts: int
    lease_seconds: float


@dataclass(frozen=True)
class RelayPass:
    events: int
    jobs: int


@dataclass(frozen=True)
class PeriodicSpec:
    kind: str
    queue: str
    every: float
    max_attempts: int
    lease_seconds: float
    run_on_start: bool


@dataclass(frozen=True)
class QueueCounts:
    waiting: int = 0
    running: int = 0
    retrying: int = 0
    failed: int = 0
    done: int = 0


@dataclass(frozen=True)
class FailedJob:
    id: int
    queue: str
    kind: str
    args_json: str
    attempt: int
    max_attempts: int
    error: str | None
    traceback: str | None
    finished_at: float | None


@dataclass(frozen=True)
class JobState:
    id: int
    queue: str
    state: str
    result_json: str | None
    error: str | None


@runtime_checkable
class Store(Protocol):
    """Durable job storage shared by every process of a service."""

    async def open(self) -> None:
        """Connect and create the schema if needed; raise ``StoreUnavailable`` when impossible."""

    async def close(self) -> None: ...

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[int]:
        """Insert jobs in one transaction; return their ids in order."""

    async def claim(self, queue: str, limit: int, worker_id: str) -> list[ClaimedJob]:
        """Atomically move up to ``limit`` runnable jobs of ``queue`` to running, under a lease;
        spends one attempt each."""

    async def complete(self, completions: Sequence[Completion]) -> None:
        """Record finished jobs (a batch, one transaction)."""

    async def fail(self, job_id: int, token: int, *, error: str, traceback: str | None, retry_at: float | None) -> None:
        """Record a failed attempt: retrying at ``retry_at``, or failed for good when it is None."""

    async def snooze(self, job_id: int, token: int, *, seconds: float) -> None:
        """Put a claimed job back to waiting for ``seconds`` without spending its attempt."""

    async def release(self, job_id: int, token: int) -> None:
        """Put an interrupted job back to waiting at once without spending its attempt."""

    async def rescue_expired(self) -> int:
        """Make running jobs whose lease expired retryable (or failed when out of attempts)."""

    async def acquire_key_lease(self, queue: str, key: str, *, holder: int, limit: int, seconds: float) -> bool:
        """Take one of ``limit`` lease slots of ``key`` for ``seconds``; False when all are held."""

    async def release_key_lease(self, queue: str, key: str, *, holder: int) -> None: ...

    async def publish(self, topic: str, payload_json: str) -> int:
        """Write an outbox row; return its id."""

    async def relay(self, routes: Mapping[str, Sequence[Route]], *, limit: int) -> RelayPass:
        """Move at most ``limit`` outbox rows into jobs, in one transaction, each row exactly once."""

    async def schedule_periodic(self, specs: Sequence[PeriodicSpec]) -> list[int]:
        """Enqueue each due periodic kind once across all processes; return the new job ids."""

    async def counts(self) -> dict[str, QueueCounts]: ...

    async def failed(self, *, limit: int = 50) -> list[FailedJob]: ...

    async def job_states(self, job_ids: Sequence[int]) -> dict[int, JobState]: ...

    async def prune_done(self, *, older_than: float) -> int:
        """Delete done jobs finished more than ``older_than`` seconds ago."""
