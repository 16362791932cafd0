"""The in-memory store: the whole :class:`~corral.runtime.stores.protocol.Store` in Python objects, for tests.

Like Procrastinate's ``InMemoryConnector``: no file and no server, nothing survives the process.
It keeps the SQL stores' semantics (claim order and tokens, leases and rescue, key leases, the
relay's exactly-once, periodic scheduling, inspection and pruning), which the store conformance
suite checks. It is single-process and asyncio-safe: every method does its work without awaiting in
between, so on one event loop each call is atomic, as a store transaction is. It is not
thread-safe: call it from the event loop only (as the runtime does). Share one instance between
runtimes of a test to let them see each other's jobs; each ``memory://`` URL makes a new one.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.runtime.errors import ConfigError, StoreUnavailable
from corral.runtime.stores.protocol import (
    CANCELLED,
    DONE,
    FAILED,
    RETRYING,
    RUNNING,
    WAITING,
    AttemptRecord,
    ClaimedJob,
    Completion,
    Enqueued,
    FailedJob,
    HeldLease,
    JobFilter,
    JobRecord,
    JobState,
    KeyLease,
    NewJob,
    PeriodicSpec,
    QueueCounts,
    RelayPass,
    Route,
    attempt_holder,
    check_final_states,
    periodic_job,
    queue_counts,
    rescue_error,
    rescue_spread,
    routed_jobs,
    shown_error,
)

__all__ = ["MemoryStore"]

_RUNNABLE = (WAITING, RETRYING)


@dataclass
class _Job:
    """One row of the SQL stores' jobs table."""

    id: int
    queue: str
    kind: str
    args_json: str
    key: str | None
    state: str
    max_attempts: int
    lease_seconds: float
    run_at: float
    enqueued_at: float
    event_id: int | None
    priority: int = 0
    unique_key: str | None = None
    unique_states: tuple[str, ...] = ()
    attempt: int = 0
    claims: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    lease_until: float | None = None
    worker_id: str | None = None
    result_json: str | None = None
    last_error: str | None = None
    last_traceback: str | None = None
    crashes: int = 0
    retries: int = 0


@dataclass
class _KeyLease:
    holder: int
    busy_until: float


class MemoryStore:
    """In-memory job store (``memory://``). ``clock`` is the store's time, as for the SQLite store."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._opened = 0  # open() calls not yet closed: runtimes sharing the store each open and close it
        self._job_ids = itertools.count(1)
        self._event_ids = itertools.count(1)
        self._jobs: dict[int, _Job] = {}
        # Per queue, a heap of (-priority, run_at, id) for every job that became runnable; an entry whose
        # job has since changed (claimed, settled, run_at moved, pruned) is dropped when it comes up.
        self._runnable: dict[str, list[tuple[int, float, int]]] = {}
        # The SQL stores' unique index: the last job inserted with each key, which holds the key while
        # its state is one of its unique_states (a job that left them has freed it).
        self._unique: dict[str, int] = {}
        self._running: set[int] = set()
        self._from_events: set[tuple[int, str]] = set()  # (event_id, kind): the SQL stores' unique index
        self._events: dict[int, tuple[str, str]] = {}  # id -> (topic, payload), in id order
        self._key_leases: dict[tuple[str, str, int], _KeyLease] = {}
        self._periodic: dict[str, float] = {}  # kind -> next run
        self._attempts: dict[int, list[AttemptRecord]] = {}  # job id -> its ended attempts, oldest first
        self._on_jobs: list[Callable[[str | None], None]] = []  # every watching runtime's claim loops

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        """``memory://`` (anything after it is ignored): a new, empty store."""
        return cls()

    def __repr__(self) -> str:
        return f"MemoryStore(jobs={len(self._jobs)})"

    @property
    def pool_size(self) -> int | None:
        return None  # no connections: the boot check uses Runtime(max_conns=...)

    def watch(
        self,
        *,
        on_jobs: Callable[[str | None], None],
        on_finished: Callable[[Sequence[int]], None],
        on_events: Callable[[], None],
    ) -> bool:
        # Like SQLite: other runtimes' new jobs are found by polling. A freed key slot wakes every
        # runtime sharing the store, as a released lease wakes its own runtime in the SQL stores.
        self._on_jobs.append(on_jobs)
        return False

    async def migrate(self) -> list[int]:
        return []  # no schema, nothing to connect to

    async def open(self) -> None:
        self._opened += 1

    async def close(self) -> None:
        self._opened = max(self._opened - 1, 0)  # the jobs stay: a test may open the store again

    async def _begin(self, conn: Any = None) -> float:
        """Every call starts here: refuse a closed store or a foreign connection, let other tasks
        run once (a real store awaits I/O here), then return the call's time."""
        if conn is not None:
            raise ConfigError("conn=... (enqueue inside your own transaction) needs the PostgreSQL store")
        if not self._opened:
            raise StoreUnavailable(f"store {self!r} is not open")
        await asyncio.sleep(0)
        return self._clock()

    def _make_runnable(self, job: _Job) -> None:
        heapq.heappush(self._runnable.setdefault(job.queue, []), (-job.priority, job.run_at, job.id))

    def _unique_holder(self, unique_key: str) -> int | None:
        holder = self._jobs.get(self._unique.get(unique_key, 0))
        return None if holder is None or holder.state not in holder.unique_states else holder.id

    def _insert(self, job: NewJob, *, now: float, event_id: int | None = None) -> Enqueued:
        if job.unique_key is not None:
            holder = self._unique_holder(job.unique_key)
            if holder is not None:
                return Enqueued.of_holder(holder)
        job_id = next(self._job_ids)
        row = _Job(
            id=job_id,
            queue=job.queue,
            kind=job.kind,
            args_json=job.args_json,
            key=job.key,
            state=WAITING,
            max_attempts=job.max_attempts,
            lease_seconds=job.lease_seconds,
            run_at=job.run_at,
            enqueued_at=now,
            event_id=event_id,
            priority=job.priority,
            unique_key=job.unique_key,
            unique_states=job.unique_states,
        )
        self._jobs[job_id] = row
        if job.unique_key is not None:
            self._unique[job.unique_key] = job_id
        self._make_runnable(row)
        if event_id is not None:
            self._from_events.add((event_id, job.kind))
        return Enqueued(job_id)

    def _unlease(self, job: _Job) -> None:
        job.lease_until = None
        job.worker_id = None
        self._running.discard(job.id)

    def _attempt_ended(self, job: _Job, *, worker_id: str | None, crashes_before: int, now: float) -> None:
        """What the SQL stores' attempts trigger records when a running job leaves ``running`` settled other
        than done (a success is recorded by the job itself: :meth:`_done_attempt`)."""
        self._attempts.setdefault(job.id, []).append(
            AttemptRecord(
                job_id=job.id,
                attempt=job.attempt,
                outcome=job.state,
                worker_id=worker_id,
                started_at=job.started_at,
                finished_at=now,
                error=job.last_error,
                traceback=job.last_traceback,
                crashed=job.crashes > crashes_before,
            )
        )

    @staticmethod
    def _done_attempt(job: _Job) -> AttemptRecord | None:
        """The SQL stores' attempt_list.sql: a done job's last attempt, read from the job itself."""
        if job.state != DONE or job.finished_at is None:
            return None
        return AttemptRecord(
            job_id=job.id,
            attempt=job.attempt,
            outcome=DONE,
            worker_id=job.worker_id,
            started_at=job.started_at,
            finished_at=job.finished_at,
            error=None,
            traceback=None,
            crashed=False,
        )

    def _forget(self, job: _Job) -> None:
        del self._jobs[job.id]
        self._attempts.pop(job.id, None)
        if job.event_id is not None:
            self._from_events.discard((job.event_id, job.kind))

    def _held(self, job_id: int, token: int) -> _Job | None:
        """The job when ``token`` is its current claim and it is still running."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.claims == token and job.state == RUNNING else None

    # -- jobs -----------------------------------------------------------------------------------

    async def enqueue(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[Enqueued]:
        now = await self._begin(conn)
        return [self._insert(job, now=now) for job in jobs]

    async def claim(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        *,
        per_key: int | None = None,
        completions: Sequence[Completion] = (),
    ) -> list[ClaimedJob]:
        now = await self._begin()
        self._complete_now(completions, now)
        if limit < 1:
            return []
        heap = self._runnable.get(queue, [])
        claimed: list[ClaimedJob] = []
        key_busy: list[tuple[int, float, int]] = []  # entries of jobs whose key has no free slot: they stay runnable
        free_slots: dict[str, list[int]] = {}
        not_due: list[tuple[int, float, int]] = []  # higher priority but later: runnable, not yet due
        while heap and len(claimed) < limit:
            entry = heapq.heappop(heap)
            _, run_at, job_id = entry
            job = self._jobs.get(job_id)
            if job is None or job.state not in _RUNNABLE or job.run_at != run_at:
                continue  # a stale entry
            if run_at > now:
                not_due.append(entry)
                continue
            if per_key is not None and job.key is not None:
                if job.key not in free_slots:
                    free_slots[job.key] = [
                        slot for slot in range(per_key) if not self._slot_busy(queue, job.key, slot, now)
                    ]
                if not free_slots[job.key]:
                    key_busy.append(entry)
                    continue
                slot = free_slots[job.key].pop(0)
                holder = attempt_holder(job.id, job.claims + 1)  # the attempt this claim starts
                self._key_leases[queue, job.key, slot] = _KeyLease(holder=holder, busy_until=now + job.lease_seconds)
            job.state = RUNNING
            job.attempt += 1
            job.claims += 1
            job.worker_id = worker_id
            job.started_at = now
            job.lease_until = now + job.lease_seconds
            self._running.add(job_id)
            claimed.append(
                ClaimedJob(
                    id=job.id,
                    queue=queue,
                    kind=job.kind,
                    args_json=job.args_json,
                    key=job.key,
                    attempt=job.attempt,
                    max_attempts=job.max_attempts,
                    token=job.claims,
                    enqueued_at=job.enqueued_at,
                    run_at=job.run_at,
                    crashes=job.crashes,
                    priority=job.priority,
                    retries=job.retries,
                )
            )
        for entry in key_busy + not_due:
            heapq.heappush(heap, entry)
        return claimed

    def _holder_of(self, queue: str, key: str, slot: int) -> int | None:
        lease = self._key_leases.get((queue, key, slot))
        return None if lease is None else lease.holder

    def _slot_busy(self, queue: str, key: str, slot: int, now: float) -> bool:
        lease = self._key_leases.get((queue, key, slot))
        return lease is not None and lease.busy_until >= now

    async def complete(self, completions: Sequence[Completion]) -> None:
        if not completions:
            return
        self._complete_now(completions, await self._begin())

    def _complete_now(self, completions: Sequence[Completion], now: float) -> None:
        for completion in completions:
            # Like the SQL stores: the current claim settles its job in any state but done (a job
            # rescued but not yet re-claimed still takes its late result).
            job = self._jobs.get(completion.job_id)
            if job is None or job.claims != completion.token or job.state in (DONE, CANCELLED):
                continue
            job.state = DONE
            job.result_json = completion.result_json
            job.finished_at = now
            job.lease_until = None  # its worker_id stays: the job is the record of its done attempt
            self._running.discard(job.id)

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        now = await self._begin()
        cancelled: list[int] = []
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is None or job.state not in (*_RUNNABLE, RUNNING):
                continue
            was_running = job.state == RUNNING
            job.state = CANCELLED
            job.finished_at = now
            job.lease_until = None  # its worker_id stays, as in the SQL stores
            job.last_error = job.last_traceback = None  # an earlier attempt's, not the cancelled one's
            self._running.discard(job.id)
            if was_running:  # as the SQL stores' attempts trigger records it
                self._attempt_ended(job, worker_id=job.worker_id, crashes_before=job.crashes, now=now)
            cancelled.append(int(job_id))
        return cancelled

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
        now = await self._begin()
        job = self._held(job_id, token)
        if job is None:
            return False
        final = retry_at is None
        worker_id, crashes_before = job.worker_id, job.crashes
        job.state = FAILED if final else RETRYING
        job.run_at = now if retry_at is None else retry_at
        job.last_error = error
        job.last_traceback = traceback
        job.finished_at = now if final else None
        job.crashes += int(crashed)
        self._unlease(job)
        self._attempt_ended(job, worker_id=worker_id, crashes_before=crashes_before, now=now)
        if not final:
            self._make_runnable(job)
        return True

    async def _unclaim(self, job_id: int, token: int, seconds: float, *, retried: bool = False) -> None:
        now = await self._begin()
        job = self._held(job_id, token)
        if job is not None:
            self._put_back(job, now + seconds, retried=retried)

    def _put_back(self, job: _Job, run_at: float, *, retried: bool) -> None:
        job.retries += int(retried)
        job.state = WAITING
        job.attempt = max(job.attempt - 1, 0)  # the claim's attempt is refunded: it never ran to an outcome
        job.run_at = run_at
        self._unlease(job)
        self._make_runnable(job)

    async def snooze(self, job_id: int, token: int, *, seconds: float, retried: bool = False) -> None:
        await self._unclaim(job_id, token, seconds, retried=retried)

    async def release(self, job_id: int, token: int) -> None:
        await self._unclaim(job_id, token, 0.0)

    async def rescue_expired(self, *, crash_kinds: Sequence[str] = ()) -> int:
        now = await self._begin()
        running = [self._jobs[job_id] for job_id in self._running]
        expired = [job for job in running if job.lease_until is not None and job.lease_until < now]
        jobs_per_worker = Counter(job.worker_id for job in running)
        for job in expired:
            if job.kind in crash_kinds and jobs_per_worker[job.worker_id] == 1:
                job.crashes += 1  # its lost worker ran it alone: the only suspect (rescue_crashes.sql)
        for job in expired:
            final = job.attempt >= job.max_attempts
            worker_id = job.worker_id
            job.state = FAILED if final else RETRYING
            job.finished_at = now if final else None
            job.run_at = now + rescue_spread(job.lease_seconds)
            job.last_error = rescue_error(job.worker_id, job.attempt)
            job.last_traceback = None
            self._unlease(job)
            # As in the SQL stores, the crash counted just above belongs to the lost worker, not this update.
            self._attempt_ended(job, worker_id=worker_id, crashes_before=job.crashes, now=now)
            if not final:
                self._make_runnable(job)
        return len(expired)

    # -- key leases -----------------------------------------------------------------------------

    async def acquire_key_lease(self, queue: str, key: str, *, holder: int, limit: int, seconds: float) -> bool:
        now = await self._begin()
        # The holder's own slot first (a claim may have taken it): renewing never takes a second one.
        held_first = sorted(range(limit), key=lambda slot: self._holder_of(queue, key, slot) != holder)
        for slot in held_first:
            lease = self._key_leases.get((queue, key, slot))
            if lease is None or lease.busy_until < now or lease.holder == holder:
                self._key_leases[queue, key, slot] = _KeyLease(holder=holder, busy_until=now + seconds)
                return True
        return False

    async def release_key_lease(self, queue: str, key: str, *, holder: int) -> None:
        await self._begin()
        if self._free_slots(queue, key, holder):
            for on_jobs in self._on_jobs:
                on_jobs(queue)

    def _free_slots(self, queue: str, key: str, holder: int) -> bool:
        held = [
            slot
            for slot, lease in self._key_leases.items()
            if slot[0] == queue and slot[1] == key and lease.holder == holder
        ]
        for slot in held:
            del self._key_leases[slot]
        return bool(held)

    async def renew(self, job_id: int, token: int, *, seconds: float, key: tuple[str, str] | None) -> bool:
        now = await self._begin()
        return self._renew(now, HeldLease(job_id=job_id, token=token, seconds=seconds, key=key))

    def renew_blocking(self, leases: Sequence[HeldLease]) -> None:
        # Plain assignments from the watchdog's thread while job code holds the loop (so no other
        # call of this store is under way): this store is for tests, in one process.
        if not self._opened:
            raise StoreUnavailable(f"store {self!r} is not open")
        now = self._clock()
        for lease in leases:
            self._renew(now, lease)

    def release_blocking(self, leases: Sequence[HeldLease]) -> int:
        # As renew_blocking: no other call of this store is under way while job code holds the loop. The
        # watchers are not told (their loop is held, and the process ends next).
        if not self._opened:
            raise StoreUnavailable(f"store {self!r} is not open")
        released = 0
        for lease in leases:
            if lease.key is not None:
                self._free_slots(lease.key[0], lease.key[1], attempt_holder(lease.job_id, lease.token))
            job = self._held(lease.job_id, lease.token)
            if job is not None:
                self._put_back(job, self._clock(), retried=False)
                released += 1
        return released

    def _renew(self, now: float, lease: HeldLease) -> bool:
        if lease.key is not None:
            holder = attempt_holder(lease.job_id, lease.token)
            for slot, key_lease in self._key_leases.items():
                if slot[:2] == lease.key and key_lease.holder == holder:
                    key_lease.busy_until = now + lease.seconds
        job = self._held(lease.job_id, lease.token)
        if job is None:
            return False
        job.lease_until = now + lease.seconds
        return True

    # -- events ---------------------------------------------------------------------------------

    async def publish(self, topic: str, payload_json: str, *, conn: Any = None) -> int:
        await self._begin(conn)
        event_id = next(self._event_ids)
        self._events[event_id] = (topic, payload_json)
        return event_id

    async def relay(self, routes: Mapping[str, Sequence[Route]], *, limit: int) -> RelayPass:
        now = await self._begin()
        taken = list(itertools.islice(self._events.items(), max(limit, 0)))
        created = 0
        for job in routed_jobs([(event_id, topic, payload) for event_id, (topic, payload) in taken], routes):
            if (job.event_id, job.route.kind) in self._from_events:
                continue  # this event already made a job of this kind
            new = NewJob(
                queue=job.route.queue,
                kind=job.route.kind,
                args_json=job.payload_json,
                key=None,
                run_at=now,
                max_attempts=job.route.max_attempts,
                lease_seconds=job.route.lease_seconds,
            )
            self._insert(new, now=now, event_id=job.event_id)
            created += 1
        for event_id, _ in taken:
            del self._events[event_id]
        return RelayPass(events=len(taken), jobs=created)

    async def schedule_periodic(self, specs: Sequence[PeriodicSpec]) -> list[int]:
        if not specs:
            return []
        now = await self._begin()
        ids: list[int] = []
        for spec in specs:
            next_run = self._periodic.get(spec.kind)
            due = spec.run_on_start if next_run is None else next_run <= now
            if next_run is None or due:
                self._periodic[spec.kind] = now + spec.every
            if due:
                ids.append(self._insert(periodic_job(spec, now), now=now))
        return ids

    # -- inspection -----------------------------------------------------------------------------

    async def counts(self) -> dict[str, QueueCounts]:
        await self._begin()
        per_state = collections.Counter((job.queue, job.state) for job in self._jobs.values())
        return queue_counts((queue, state, count) for (queue, state), count in per_state.items())

    async def failed(self, *, limit: int = 50) -> list[FailedJob]:
        await self._begin()
        failed = [job for job in self._jobs.values() if job.state == FAILED]
        failed.sort(key=lambda job: (job.finished_at or 0.0, job.id), reverse=True)
        return [
            FailedJob(
                id=job.id,
                queue=job.queue,
                kind=job.kind,
                args_json=job.args_json,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                error=job.last_error,
                traceback=job.last_traceback,
                finished_at=job.finished_at,
            )
            for job in failed[: max(limit, 0)]
        ]

    async def job_states(self, job_ids: Sequence[int]) -> dict[int, JobState]:
        await self._begin()
        found = (self._jobs.get(job_id) for job_id in job_ids)
        return {
            job.id: JobState(
                id=job.id, queue=job.queue, state=job.state, result_json=job.result_json, error=job.last_error
            )
            for job in found
            if job is not None
        }

    async def prune_done(self, *, older_than: float) -> int:
        now = await self._begin()
        cutoff = now - older_than
        old = [
            job
            for job in self._jobs.values()
            if job.state == DONE and job.finished_at is not None and job.finished_at < cutoff
        ]
        for job in old:
            self._forget(job)
        return len(old)

    # -- operating ------------------------------------------------------------------------------

    async def open_existing(self, *, read_only: bool) -> None:
        await self.open()  # nothing to create or migrate; read-only is not enforced in memory

    @staticmethod
    def _record(job: _Job) -> JobRecord:
        return JobRecord(
            id=job.id,
            queue=job.queue,
            kind=job.kind,
            args_json=job.args_json,
            key=job.key,
            state=job.state,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            enqueued_at=job.enqueued_at,
            run_at=job.run_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            lease_until=job.lease_until,
            worker_id=job.worker_id,
            result_json=job.result_json,
            error=shown_error(job.state, job.last_error),
            traceback=shown_error(job.state, job.last_traceback),
            crashes=job.crashes,
        )

    async def list_jobs(self, where: JobFilter) -> list[JobRecord]:
        await self._begin()
        found = [
            job
            for job in self._jobs.values()
            if where.queue in (None, job.queue)
            and where.kind in (None, job.kind)
            and where.state in (None, job.state)
            and (where.since is None or job.enqueued_at >= where.since)
        ]
        found.sort(key=lambda job: job.id, reverse=True)
        return [self._record(job) for job in found[: max(where.limit, 0)]]

    async def job(self, job_id: int) -> JobRecord | None:
        await self._begin()
        job = self._jobs.get(job_id)
        return None if job is None else self._record(job)

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        await self._begin()
        recorded = list(self._attempts.get(job_id, ()))
        job = self._jobs.get(job_id)
        done = None if job is None else self._done_attempt(job)
        return recorded if done is None else [*recorded, done]

    async def key_leases(self) -> list[KeyLease]:
        now = await self._begin()
        return [
            KeyLease(queue=queue, key=key, slot=slot, holder=lease.holder, busy_until=lease.busy_until)
            for (queue, key, slot), lease in sorted(self._key_leases.items())
            if lease.busy_until >= now
        ]

    async def finished_since(self, since: float) -> list[tuple[str, str, float]]:
        await self._begin()
        ended = [
            (self._jobs[job_id].queue, attempt.outcome, attempt.finished_at)
            for job_id, attempts in self._attempts.items()
            for attempt in attempts
            if attempt.finished_at >= since
        ]
        ended += [
            (job.queue, DONE, job.finished_at)
            for job in self._jobs.values()
            if job.state == DONE and job.finished_at is not None and job.finished_at >= since
        ]
        return sorted(ended, key=lambda row: row[2])

    async def retry_failed(self, job_ids: Sequence[int] | None, *, queue: str | None = None) -> list[int]:
        now = await self._begin()
        chosen = self._jobs.values() if job_ids is None else [self._jobs[i] for i in job_ids if i in self._jobs]
        retried = []
        for job in sorted(chosen, key=lambda job: job.id):
            if job.state != FAILED or (queue is not None and job.queue != queue):
                continue
            if job.unique_key is not None:
                # As the SQL stores: not while another job holds the key; waiting again, this one holds it.
                if self._unique_holder(job.unique_key) not in (None, job.id):
                    continue
                self._unique[job.unique_key] = job.id
            retried.append(job)
            job.state = WAITING  # now, so a later job of the same key sees it hold the key
            job.attempt = 0
            job.crashes = 0
            job.retries = 0
            job.run_at = now
            job.finished_at = None
            job.last_error = None
            job.last_traceback = None
            self._make_runnable(job)
        for on_jobs in self._on_jobs:
            for woken in sorted({job.queue for job in retried}):
                on_jobs(woken)
        return sorted(job.id for job in retried)

    async def purge(self, *, states: Sequence[str], older_than: float) -> int:
        check_final_states(states)
        cutoff = await self._begin() - older_than
        old = [
            job
            for job in self._jobs.values()
            if job.state in states and job.finished_at is not None and job.finished_at < cutoff
        ]
        for job in old:
            self._forget(job)
        return len(old)
