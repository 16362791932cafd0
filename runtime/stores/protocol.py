"""The storage interface: one small, async, claim-oriented :class:`Store` protocol and its records.

Three implementations, one folder each under :mod:`corral.runtime.stores`: the embedded SQLite store,
the PostgreSQL store and the in-memory store for tests. Every method is one short transaction: no
job code ever runs while a store transaction or connection is held. This module also owns what
the stores share beyond the protocol: turning selected rows into records, routing relayed events
to jobs, and the text a rescued job's error carries.

Job states: ``waiting`` (new, snoozed or released), ``running`` (claimed, under a lease),
``retrying`` (failed or rescued, runnable again at ``run_at``), ``done``, ``failed`` and
``cancelled`` (final). A cancelled job is never claimed again and keeps that state whatever its running
attempt (if any) records afterwards: the store refuses the attempt's outcome.

Claims take the highest ``priority`` first (0..3), then the oldest ``run_at``, then the lowest id.
A job with a ``unique_key`` holds that key while its state is one of its ``unique_states`` (always
the runnable and running ones): an enqueue of another job with the key inserts nothing and answers
the holder's id, as :class:`Enqueued` with ``duplicate=True``; each store enforces it in its insert,
so concurrent enqueuers in any process never make two.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from corral.runtime.errors import ConfigError

__all__ = [
    "CANCELLED",
    "DONE",
    "FAILED",
    "FINAL_STATES",
    "JOB_IDS",
    "PRIORITIES",
    "RETRYING",
    "RUNNING",
    "STATES",
    "UNIQUE_ALWAYS",
    "WAITING",
    "AttemptRecord",
    "ClaimedJob",
    "Completion",
    "Enqueued",
    "FailedJob",
    "HeldLease",
    "JobFilter",
    "JobRecord",
    "JobState",
    "KeyLease",
    "NewJob",
    "PeriodicSpec",
    "QueueCounts",
    "RelayPass",
    "Route",
    "RoutedJob",
    "Store",
    "attempt_holder",
    "attempt_record",
    "check_final_states",
    "claimed_job",
    "failed_job",
    "job_record",
    "periodic_job",
    "queue_counts",
    "rescue_error",
    "rescue_spread",
    "routed_jobs",
    "unique_states_text",
]

WAITING = "waiting"
RUNNING = "running"
RETRYING = "retrying"
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"
STATES = (WAITING, RUNNING, RETRYING, FAILED, DONE, CANCELLED)
FINAL_STATES = (DONE, FAILED, CANCELLED)
# The states in which a unique job always holds its key: a job moves between them without a new
# insert, so a key released in one of them could be taken by a second job and collide on its return.
UNIQUE_ALWAYS = (WAITING, RUNNING, RETRYING)
PRIORITIES = range(4)  # 0 (the default) .. 3 (claimed first)
# Every job id a store can hold: both SQL stores keep them as signed 64-bit integers, and SQLite's driver
# raises OverflowError on a larger one, so a caller checks an id it was given against this first.
JOB_IDS = range(1, 2**63)


class Enqueued(int):
    """The id of an enqueued job (an ``int``: ``job_id = await runtime.enqueue(...)`` stays an id, and
    prints as one); ``duplicate`` is True when the job was not inserted because a job holding the same unique key
    exists, whose id this is."""

    # A class default, not an argument of __new__: a Python __new__ made every plain job's id cost 0.5 us
    # instead of 0.1 us, on the enqueue path every job takes.
    duplicate: bool = False

    @classmethod
    def of_holder(cls, job_id: int) -> Enqueued:
        """The answer to a duplicate: the id of the job that holds the unique key, ``duplicate`` True."""
        holder = cls(job_id)
        holder.duplicate = True
        return holder

    @property
    def id(self) -> int:
        return int(self)


@dataclass(slots=True)
class NewJob:
    """A job to insert. ``args_json`` is already validated JSON (an object). Slotted, not frozen: one is
    built per enqueued job, and a frozen ``__init__`` cost 4.5 us of it against 0.5 us; nothing changes
    one once built."""

    queue: str
    kind: str
    args_json: str
    key: str | None
    run_at: float
    max_attempts: int
    lease_seconds: float
    priority: int = 0
    unique_key: str | None = None
    """The key the job holds while its state is one of ``unique_states`` (a digest the runtime makes)."""
    unique_states: tuple[str, ...] = UNIQUE_ALWAYS

    def leading_values(self) -> tuple[str, str, str, str | None, int, float]:
        """The values every store's insert statement starts with, in this order: queue, kind, args_json,
        key, max_attempts, lease_seconds (when and how it runs follow, as each store keeps them)."""
        return (self.queue, self.kind, self.args_json, self.key, self.max_attempts, self.lease_seconds)


@dataclass(slots=True)
class ClaimedJob:
    """A job this worker now holds. ``token`` identifies the claim: settling a job needs it,
    so a worker that lost its lease cannot settle somebody else's attempt. Slotted rather than frozen
    (one is built per claimed job, a frozen ``__init__`` costs 2.5x); nothing changes one once built."""

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
    crashes: int = 0
    """How many earlier attempts crashed their worker process (recorded with ``fail(crashed=True)``)."""
    priority: int = 0
    retries: int = 0
    """How many times the job asked to run later (``raise Retry``, recorded with ``snooze(retried=True)``)."""

    @property
    def claim_order(self) -> tuple[int, float, int]:
        """Where the job stands in its queue's claim order (smallest first)."""
        return (-self.priority, self.run_at, self.id)


@dataclass(slots=True)
class Completion:
    """A successful attempt's result for :meth:`Store.complete`; slotted, not frozen: one per job."""

    job_id: int
    token: int
    result_json: str | None


@dataclass(slots=True)
class HeldLease:
    """An attempt this process still runs, for :meth:`Store.renew_blocking`: its job lease and, with
    ``key`` (``(queue, key)``), the key slot its :func:`attempt_holder` holds, extended by ``seconds``.
    Slotted, not frozen: one is built per claimed job; nothing changes one once built."""

    job_id: int
    token: int
    seconds: float
    key: tuple[str, str] | None


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
    cancelled: int = 0


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


@dataclass(frozen=True)
class JobRecord:
    """A job as the operator sees it (``corral jobs list/show``, the dashboard). Times are Unix seconds;
    ``error``/``traceback`` are the last attempt's."""

    id: int
    queue: str
    kind: str
    args_json: str
    key: str | None
    state: str
    attempt: int
    max_attempts: int
    enqueued_at: float
    run_at: float
    started_at: float | None
    finished_at: float | None
    lease_until: float | None
    worker_id: str | None
    result_json: str | None
    error: str | None
    traceback: str | None
    crashes: int


@dataclass(frozen=True)
class JobFilter:
    """Which jobs :meth:`Store.list_jobs` answers: up to ``limit``, of ``queue``/``kind``/``state`` when
    given, enqueued at or after ``since`` (Unix seconds)."""

    queue: str | None = None
    kind: str | None = None
    state: str | None = None
    since: float | None = None
    limit: int = 50


@dataclass(frozen=True)
class AttemptRecord:
    """One ended attempt of a job: ``outcome`` is the state it left the job in (``done``, ``retrying``,
    ``failed``); ``crashed`` says the attempt crashed its worker process."""

    job_id: int
    attempt: int
    outcome: str
    worker_id: str | None
    started_at: float | None
    finished_at: float
    error: str | None
    traceback: str | None
    crashed: bool


@dataclass(frozen=True)
class KeyLease:
    """A held per-key slot: ``holder`` is the attempt's :func:`attempt_holder`, busy until ``busy_until``."""

    queue: str
    key: str
    slot: int
    holder: int
    busy_until: float


@runtime_checkable
class Store(Protocol):
    """Durable job storage shared by every process of a service."""

    @property
    def pool_size(self) -> int | None:
        """The ``max_size`` of the connection pool the store draws from, or None when it has none.
        The boot check uses it instead of ``Runtime(max_conns=...)``."""

    def watch(
        self,
        *,
        on_jobs: Callable[[str | None], None],
        on_finished: Callable[[Sequence[int]], None],
        on_events: Callable[[], None],
    ) -> bool:
        """Register (before :meth:`open`) what to call when another process enqueued runnable jobs of a
        queue (``None``: anything may have changed, e.g. after a reconnect), finished jobs, or
        published events. Return True when the store will push such notices (polling is then only a
        fallback), False when it cannot (callers poll)."""

    async def migrate(self) -> list[int]:
        """Create or upgrade the schema (connecting if needed); return the schema versions applied."""

    async def open(self) -> None:
        """Connect and check the schema; raise ``StoreUnavailable`` when impossible."""

    async def close(self) -> None: ...

    async def enqueue(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[Enqueued]:
        """Insert jobs in one transaction; return their ids in order. A job whose ``unique_key`` a job
        holds (one stored, or an earlier one of ``jobs``) is not inserted: its answer is the holder's
        id with ``duplicate=True``. With ``conn`` (a connection of the application, inside its own
        transaction) the jobs exist if and only if it commits."""

    async def claim(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        *,
        per_key: int | None = None,
        completions: Sequence[Completion] = (),
    ) -> list[ClaimedJob]:
        """Atomically move up to ``limit`` runnable jobs of ``queue`` to running, under a lease;
        spends one attempt each. With ``per_key`` (the queue's limit), a job with a key is claimed only
        together with one of its key's ``per_key`` slots, taken in the same transaction for the job's
        lease (holder: the attempt's :func:`attempt_holder`, so the executor's :meth:`acquire_key_lease`
        renews it); jobs whose key has no free slot are skipped, and the jobs behind them claimed instead.
        ``completions`` ride along: recorded as :meth:`complete` records them, in the claim's transaction
        (one round trip for both); when the call raises, neither they nor the claim were recorded (or, for
        an error after the commit, both were: recording them again changes nothing)."""

    async def complete(self, completions: Sequence[Completion]) -> None:
        """Record finished jobs (a batch, one transaction)."""

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        """Move each job of ``job_ids`` that is waiting, retrying or running to ``cancelled`` (one
        transaction); return the ids it cancelled, in order (jobs already final, or unknown, are left).
        A running one's attempt is told by the store's finished-job notice where it pushes them; its
        process also finds it by reading :meth:`job_states` of the attempts it runs."""

    async def fail(
        self,
        job_id: int,
        token: int,
        *,
        error: str,
        traceback: str | None,
        retry_at: float | None,
        crashed: bool = False,
    ) -> bool:
        """Record a failed attempt: retrying at ``retry_at``, or failed for good when it is None;
        ``crashed``: the attempt crashed its worker process, and the job's crash count grows by one.
        Return False when the store refused it: the attempt no longer holds the job (its lease
        expired and it was rescued, or another claim settled it), whose record then stands."""

    async def snooze(self, job_id: int, token: int, *, seconds: float, retried: bool = False) -> None:
        """Put a claimed job back to waiting for ``seconds`` without spending its attempt; ``retried``:
        the job itself asked for it (``raise Retry``), and the job's retry count grows by one."""

    async def release(self, job_id: int, token: int) -> None:
        """Put an interrupted job back to waiting at once without spending its attempt."""

    async def rescue_expired(self, *, crash_kinds: Sequence[str] = ()) -> int:
        """Make running jobs whose lease expired retryable (or failed when out of attempts). A job of one
        of ``crash_kinds`` whose lost worker ran no other job has its crash count grow by one first."""

    async def acquire_key_lease(self, queue: str, key: str, *, holder: int, limit: int, seconds: float) -> bool:
        """Take one of ``limit`` lease slots of ``key`` for ``seconds``; False when all are held.
        ``holder`` is the attempt's :func:`attempt_holder`: a slot it already holds is renewed."""

    async def release_key_lease(self, queue: str, key: str, *, holder: int) -> None:
        """Free ``holder``'s slots of ``key`` and wake the queue's claimers (this runtime's at once,
        other processes' by the store's notice when it pushes them)."""

    async def renew(self, job_id: int, token: int, *, seconds: float, key: tuple[str, str] | None) -> bool:
        """The attempt ``token`` of ``job_id`` still runs in this process: extend its job lease to
        ``seconds`` from now while it is still running under that claim, and the slot of ``key``
        (``(queue, key)``) its :func:`attempt_holder` holds, even once the attempt is recorded (its
        code has not ended). Return whether the job lease was extended."""

    def renew_blocking(self, leases: Sequence[HeldLease]) -> None:
        """:meth:`renew` each of ``leases``, blocking, on a connection of the call's own: called from the
        loop watchdog's thread while job code holds the event loop, so it must neither need the loop
        nor touch the store's async connections. Raises ``StoreUnavailable`` when the store cannot be
        reached."""

    def release_blocking(self, leases: Sequence[HeldLease]) -> int:
        """:meth:`release` each of ``leases``' attempts and free its key slot, blocking, on a connection of
        the call's own (as :meth:`renew_blocking`): a worker whose stop is overdue, because job code holds
        its event loop, puts its jobs back this way just before it ends its process, so they run again
        at once elsewhere, their attempts not spent. Return how many jobs went back to waiting. Raises
        ``StoreUnavailable`` when the store cannot be reached."""

    async def publish(self, topic: str, payload_json: str, *, conn: Any = None) -> int:
        """Write an outbox row; return its id. ``conn`` as for :meth:`enqueue`."""

    async def relay(self, routes: Mapping[str, Sequence[Route]], *, limit: int) -> RelayPass:
        """Move at most ``limit`` outbox rows into jobs, in one transaction, each row exactly once."""

    async def schedule_periodic(self, specs: Sequence[PeriodicSpec]) -> list[int]:
        """Enqueue each due periodic kind once across all processes; return the new job ids."""

    async def counts(self) -> dict[str, QueueCounts]: ...

    async def failed(self, *, limit: int = 50) -> list[FailedJob]: ...

    async def job_states(self, job_ids: Sequence[int]) -> dict[int, JobState]: ...

    async def prune_done(self, *, older_than: float) -> int:
        """Delete done jobs finished more than ``older_than`` seconds ago."""

    # -- operating: what ``corral jobs`` and ``corral ui`` read and change --------------------------

    async def open_existing(self, *, read_only: bool) -> None:
        """Connect to a store that already exists with this corral's schema, never creating, migrating or
        listening: raise ``StoreUnavailable`` naming where it looked otherwise. ``read_only``: the
        connection refuses writes (where the database can enforce it)."""

    async def list_jobs(self, where: JobFilter) -> list[JobRecord]:
        """The jobs ``where`` selects, newest first."""

    async def job(self, job_id: int) -> JobRecord | None: ...

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        """The job's ended attempts, oldest first."""

    async def key_leases(self) -> list[KeyLease]:
        """The key slots held now (their ``busy_until`` not yet past)."""

    async def finished_since(self, since: float) -> list[tuple[str, str, float]]:
        """``(queue, outcome, finished_at)`` of every attempt that ended at or after ``since``."""

    async def retry_failed(self, job_ids: Sequence[int] | None, *, queue: str | None = None) -> list[int]:
        """Make failed jobs (those of ``job_ids``, or every one, of ``queue`` when given) waiting again,
        due now, with a fresh set of attempts and crashes; return the ids retried (others are skipped)."""

    async def purge(self, *, states: Sequence[str], older_than: float) -> int:
        """Delete jobs in the final ``states`` (of :data:`FINAL_STATES`) finished more than ``older_than``
        seconds ago, with their attempts; return how many."""


# -- shared by the stores ----------------------------------------------------------------------------


# Claims of one job (its ``token``) counted below this span make distinct holders; beyond 2**24
# claims of one job the numbers repeat, which only a job snoozed for months could reach.
CLAIM_SPAN = 1 << 24


def attempt_holder(job_id: int, token: int) -> int:
    """The key-lease holder of one attempt: the job's id and its claim token in one (64-bit) number.
    A key lease belongs to an attempt, never to a job: a retry of the job is another holder, so it
    cannot re-enter its stale attempt's slot, and the stale attempt cannot release the retry's."""
    return job_id * CLAIM_SPAN + token % CLAIM_SPAN


def rescue_spread(lease_seconds: float, rng: random.Random | None = None) -> float:
    """Seconds from the rescue until a rescued job is due: random within one lease, per job, so the
    jobs a lost worker ran together (one of which may be what killed it) are not claimed together
    again. The SQL stores draw the same in their ``rescue.sql``."""
    return lease_seconds * (rng or random).random()


def rescue_error(worker_id: str | None, attempt: int) -> str:
    """The error a rescued job carries. The SQL stores compute the same text in their ``rescue.sql``
    (the conformance suite holds all stores to it)."""
    worker = "?" if worker_id is None else worker_id
    return f"lease expired: the worker {worker} was lost while running attempt {attempt}"


def claimed_job(queue: str, row: Sequence[Any]) -> ClaimedJob:
    """A claimed row: ``id, kind, args, key, attempt, max_attempts, claims, enqueued_at, run_at, crashes,
    priority, retries``."""
    return ClaimedJob(
        id=row[0],
        queue=queue,
        kind=row[1],
        args_json=row[2],
        key=row[3],
        attempt=row[4],
        max_attempts=row[5],
        token=row[6],
        enqueued_at=row[7],
        run_at=row[8],
        crashes=row[9],
        priority=row[10],
        retries=row[11],
    )


def periodic_job(spec: PeriodicSpec, now: float) -> NewJob:
    """The job a due periodic kind gets: no arguments, no key, runnable ``now``."""
    return NewJob(
        queue=spec.queue,
        kind=spec.kind,
        args_json="{}",
        key=None,
        run_at=now,
        max_attempts=spec.max_attempts,
        lease_seconds=spec.lease_seconds,
    )


def unique_states_text(states: Sequence[str]) -> str:
    """``unique_states`` as the SQL stores keep them: ``,waiting,running,...,`` (a comma on each side
    of every state, so the index's ``instr``/``strpos`` matches whole state names only)."""
    return "," + ",".join(states) + ","


def failed_job(row: Sequence[Any]) -> FailedJob:
    """A failed row: ``id, queue, kind, args, attempt, max_attempts, last_error, last_traceback, finished_at``."""
    return FailedJob(
        id=row[0],
        queue=row[1],
        kind=row[2],
        args_json=row[3],
        attempt=row[4],
        max_attempts=row[5],
        error=row[6],
        traceback=row[7],
        finished_at=row[8],
    )


def shown_error(state: str, error: str | None) -> str | None:
    """A job's error (or traceback) as it is reported: none for a done job, whose last attempt succeeded.
    The stores leave an earlier attempt's error on the row rather than write it again on success (the
    attempts history keeps every attempt's)."""
    return None if state == "done" else error


def job_record(row: Sequence[Any]) -> JobRecord:
    """A job row: ``id, queue, kind, args, key, state, attempt, max_attempts, enqueued_at, run_at,
    started_at, finished_at, lease_until, worker_id, result, last_error, last_traceback, crashes``."""
    record = JobRecord(*row)
    if record.state == "done" and (record.error is not None or record.traceback is not None):
        return replace(record, error=None, traceback=None)  # as shown_error reports it
    return record


def attempt_record(row: Sequence[Any]) -> AttemptRecord:
    """An attempt row: ``job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback,
    crashed``."""
    job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, crashed = row
    return AttemptRecord(job_id, attempt, outcome, worker_id, started_at, finished_at, error, traceback, bool(crashed))


def check_final_states(states: Sequence[str]) -> None:
    """Refuse a purge of anything but final states: a waiting or running job is never dropped."""
    if not states or any(state not in FINAL_STATES for state in states):
        raise ConfigError(f"purge takes final states only ({', '.join(FINAL_STATES)}), got {list(states)}")


def queue_counts(rows: Iterable[Sequence[Any]]) -> dict[str, QueueCounts]:
    """Rows of ``queue, state, count`` into counts per queue."""
    per_queue: dict[str, dict[str, int]] = {}
    for queue, state, count in rows:
        per_queue.setdefault(queue, {})[state] = int(count)
    return {queue: QueueCounts(**states) for queue, states in per_queue.items()}


@dataclass(frozen=True)
class RoutedJob:
    """A job the relay creates from an event: ``payload_json`` becomes its arguments."""

    route: Route
    payload_json: str
    event_id: int


def routed_jobs(events: Iterable[Sequence[Any]], routes: Mapping[str, Sequence[Route]]) -> list[RoutedJob]:
    """Rows of ``id, topic, payload`` into one job per subscribed kind (events nobody subscribes to
    produce none: the relay drops them, as the runtime warned at publish)."""
    return [
        RoutedJob(route=route, payload_json=payload, event_id=event_id)
        for event_id, topic, payload in events
        for route in routes.get(topic, ())
    ]
