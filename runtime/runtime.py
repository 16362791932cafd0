"""The :class:`Runtime`: lifecycle, per-queue workers, the relay, the rescuer, periodic jobs and waiters.

Owns the rules the gate protects: each queue has its own worker limit, every job has a hard
timeout, job exceptions are recorded (never fatal), keyed jobs take a cross-process lease,
shutdown is soft then hard, and crashed work is rescued once its lease expires. Tasks and
threads are never created here directly: they come from :mod:`corral.runtime.infra`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
import random
import socket
import time
import traceback
import uuid
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from corral.runtime.budget import Budget, compute_budget
from corral.runtime.declarations import JobContext, JobKind, Queue
from corral.runtime.errors import (
    BudgetError,
    ConfigError,
    CorralRuntimeError,
    JobArgumentError,
    UnknownJobKind,
)
from corral.runtime.infra import cancel_detached, run_in_thread, spawn, wait_event
from corral.runtime.names import check_name
from corral.runtime.stores import open_store
from corral.runtime.stores.protocol import (
    DONE,
    FAILED,
    ClaimedJob,
    Completion,
    FailedJob,
    NewJob,
    PeriodicSpec,
    QueueCounts,
    Route,
    Store,
)

__all__ = ["JobStatus", "Runtime", "RuntimeStats", "retry_delay"]

log = logging.getLogger("corral.runtime")

MAX_KEY_LENGTH = 255


def retry_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (1-based): exponential, capped, with "equal jitter".

    Half the delay is fixed and half random, so retries of jobs that failed together spread out
    without ever retrying sooner than half the exponential step.
    """
    step = min(cap, base * 2.0 ** max(attempt - 1, 0))
    return step * (0.5 + (rng or random).random() / 2)


@dataclass(frozen=True)
class JobStatus:
    """The answer of :meth:`Runtime.wait`.

    ``waited`` is False when the wait was refused because the queue already has its maximum of
    waiters: the caller should answer "not yet" instead of queueing behind others.
    """

    job_id: int
    state: str
    waited: bool
    result: Any = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in (DONE, FAILED)


@dataclass
class RuntimeStats:
    """Counters of this process's runtime, for tests, logs and the benchmark."""

    completed: int = 0
    failed_attempts: int = 0
    snoozed: int = 0
    released: int = 0
    rescued: int = 0
    relay_passes: list[int] = field(default_factory=list)  # events moved per non-empty pass


@dataclass
class _QueueWorker:
    queue: Queue
    wake: asyncio.Event
    running: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    loop_task: asyncio.Task[None] | None = None


@dataclass
class _Waiter:
    queue: str
    futures: list[asyncio.Future[JobStatus]] = field(default_factory=list)


class _HardStop(Exception):
    """Internal: a job task was cancelled by the hard stop (not by the job itself)."""


class _JobRaisedBaseException(Exception):
    """Carries a BaseException (KeyboardInterrupt, SystemExit, ...) raised by job code, so it is
    recorded like any failure instead of escaping the event loop."""

    def __init__(self, inner: BaseException) -> None:
        super().__init__(f"{type(inner).__name__}: {inner}")
        self.inner = inner


async def _contain(coro: Any) -> Any:
    try:
        return await coro
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise _JobRaisedBaseException(exc) from exc


def _describe_error(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, _JobRaisedBaseException):
        exc = exc.inner
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class Runtime:
    """The job runtime of one process. ``async with runtime:`` starts it; leaving stops it.

    ``max_conns``/``reserve``/``relay`` feed the boot check (:func:`corral.runtime.budget.compute_budget`):
    the workers of the queues this process runs plus ``relay`` must fit in ``max_conns * reserve``.
    When the store draws from a connection pool, the pool's real ``max_size`` is ``max_conns``.
    ``migrate=True`` creates or upgrades the store's schema at start (else ``corral migrate``).
    """

    def __init__(
        self,
        *,
        queues: Sequence[Queue],
        store: str | Store,
        max_conns: int = 40,
        relay: int = 1,
        reserve: float = 0.5,
        grace: float = 20.0,
        max_waiters: int = 64,
        relay_batch: int = 200,
        relay_interval: float = 0.2,
        rescue_interval: float = 5.0,
        notify_interval: float = 0.05,
        hot_poll: float = 0.002,
        key_busy_snooze: float = 2.0,
        retry_base: float = 1.0,
        retry_cap: float = 3600.0,
        keep_done: float = 7 * 86400.0,
        notify_fallback: float = 1.0,
        migrate: bool = False,
        worker_id: str | None = None,
    ) -> None:
        if isinstance(queues, Queue) or not all(isinstance(q, Queue) for q in queues):
            raise ConfigError("queues must be a sequence of Queue objects")
        self._queues: dict[str, Queue] = {}
        self._kinds: dict[str, JobKind] = {}
        for queue in queues:
            if queue.name in self._queues:
                raise ConfigError(f"queue {queue.name!r} is declared twice")
            self._queues[queue.name] = queue
            for name, kind in queue.kinds.items():
                other = self._kinds.get(name)
                if other is not None:
                    raise ConfigError(f"job kind {name!r} is declared on queue {other.queue!r} and on {queue.name!r}")
                self._kinds[name] = kind
        for label, value in (("max_conns", max_conns), ("max_waiters", max_waiters), ("relay_batch", relay_batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{label} must be an integer >= 1, got {value!r}")
        if isinstance(relay, bool) or not isinstance(relay, int) or relay < 0:
            raise ConfigError(f"relay must be an integer >= 0, got {relay!r}")
        for label, seconds in (
            ("grace", grace),
            ("relay_interval", relay_interval),
            ("rescue_interval", rescue_interval),
            ("notify_interval", notify_interval),
            ("hot_poll", hot_poll),
            ("key_busy_snooze", key_busy_snooze),
            ("retry_base", retry_base),
            ("retry_cap", retry_cap),
            ("keep_done", keep_done),
            ("notify_fallback", notify_fallback),
        ):
            if not math.isfinite(seconds) or seconds < 0:
                raise ConfigError(f"{label} must be a finite number of seconds >= 0, got {seconds!r}")
        self.store: Store = open_store(store, max_conns=max_conns)
        self.max_conns = self.store.pool_size or max_conns
        self.relay = relay
        self.reserve = reserve
        self.grace = grace
        self.max_waiters = max_waiters
        self.relay_batch = relay_batch
        self.relay_interval = relay_interval
        self.rescue_interval = rescue_interval
        self.notify_interval = notify_interval
        self.hot_poll = hot_poll
        self.key_busy_snooze = key_busy_snooze
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.keep_done = keep_done
        self.notify_fallback = notify_fallback
        self.migrate = migrate
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stats = RuntimeStats()

        self._routes: dict[str, list[Route]] = {}
        for kind in self._kinds.values():
            for topic in kind.on:
                self._routes.setdefault(topic, []).append(
                    Route(
                        kind=kind.name,
                        queue=kind.queue,
                        max_attempts=kind.max_attempts,
                        lease_seconds=kind.lease_seconds,
                    )
                )
        self._periodic = [
            PeriodicSpec(
                kind=k.name,
                queue=k.queue,
                every=k.every,
                max_attempts=k.max_attempts,
                lease_seconds=k.lease_seconds,
                run_on_start=k.run_on_start,
            )
            for k in self._kinds.values()
            if k.every is not None
        ]

        self._started = False
        self._stopped = False
        # Loops end on cancellation *and* on these flags: on Python < 3.12 a cancellation racing a
        # result inside asyncio.wait_for (used by psycopg_pool while a connection is handed over) is
        # swallowed, and a loop that only relied on it would never end.
        self._plumbing_stopped = False
        self._stopping = False  # soft stop: no more claims
        self._hard_stopping = False  # hard stop: running jobs are being cancelled
        self._workers: dict[str, _QueueWorker] = {}
        self._plumbing: list[asyncio.Task[None]] = []
        self._relay_tasks: list[asyncio.Task[None]] = []
        self._relay_wake: asyncio.Event | None = None
        self._completions: asyncio.Queue[Completion | None] | None = None
        self._completer: asyncio.Task[None] | None = None
        self._waiters: dict[int, _Waiter] = {}
        self._waiter_counts: Counter[str] = Counter()
        self._notify_wake: asyncio.Event | None = None
        self._job_queues: OrderedDict[int, str] = OrderedDict()  # recent job id -> queue, for wait()
        # True when the store pushes other processes' notices (PostgreSQL LISTEN): polling is then
        # only the fallback, at each queue's `poll`.
        self._pushed = self.store.watch(
            on_jobs=self._on_jobs_notice, on_finished=self._on_finished_notice, on_events=self._on_events_notice
        )

    # -- declarations ---------------------------------------------------------------------------

    @property
    def queues(self) -> dict[str, Queue]:
        return dict(self._queues)

    @property
    def kinds(self) -> dict[str, JobKind]:
        return dict(self._kinds)

    def budget(self, queues: Sequence[str] | None = None) -> Budget:
        """The connection budget of this process when it runs ``queues`` (default: all)."""
        names = list(self._queues) if queues is None else list(queues)
        return compute_budget(
            [(name, self._queues[name].max_workers) for name in names],
            relay=self.relay,
            max_conns=self.max_conns,
            reserve=self.reserve,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self, *, queues: Sequence[str] | None = None) -> None:
        """Check the budget, open the store and start working ``queues`` (default: all; ``[]`` runs
        no workers but still relays, rescues, schedules periodic jobs and serves waiters)."""
        if self._started:
            raise CorralRuntimeError("runtime already started (a Runtime starts once)")
        names = list(self._queues) if queues is None else list(dict.fromkeys(queues))
        unknown = [name for name in names if name not in self._queues]
        if unknown:
            raise ConfigError(f"unknown queue(s) {', '.join(map(repr, unknown))}; declared: {', '.join(self._queues)}")
        budget = self.budget(names)
        if not budget.ok:
            raise BudgetError(
                f"refusing to start: workers plus relay exceed the connection budget: {budget.describe()}. "
                "Lower max_workers or relay, or raise max_conns."
            )
        if self.migrate:
            await self.store.migrate()
        await self.store.open()
        self._started = True
        self._relay_wake = asyncio.Event()
        self._notify_wake = asyncio.Event()
        self._completions = asyncio.Queue()
        self._completer = spawn(self._complete_loop(), name="corral:completer")
        self._plumbing.append(spawn(self._notify_loop(), name="corral:notifier"))
        self._plumbing.append(spawn(self._rescue_loop(), name="corral:rescuer"))
        if self._periodic:
            self._plumbing.append(spawn(self._periodic_loop(), name="corral:periodic"))
        for index in range(self.relay):
            self._relay_tasks.append(spawn(self._relay_loop(), name=f"corral:relay-{index}"))
        for name in names:
            worker = _QueueWorker(queue=self._queues[name], wake=asyncio.Event())
            self._workers[name] = worker
            worker.loop_task = spawn(self._work_queue(worker), name=f"corral:queue:{name}")
        log.info("corral runtime %s started: %s", self.worker_id, budget.describe())

    async def stop(self, grace: float | None = None) -> None:
        """Stop the relay, stop claiming, wait up to ``grace`` seconds for running jobs, then cancel
        them; cancelled jobs go back to waiting without spending an attempt."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        grace = self.grace if grace is None else grace
        # 1. the relay first: no new jobs appear from the outbox while we drain
        await self._cancel_all(self._relay_tasks)
        # 2. stop claiming
        self._stopping = True
        for worker in self._workers.values():
            worker.wake.set()
        await asyncio.gather(*(w.loop_task for w in self._workers.values() if w.loop_task), return_exceptions=True)
        # 3. soft stop: let running jobs finish, up to grace
        running = [task for w in self._workers.values() for task in w.running.values()]
        if running:
            _, pending = await asyncio.wait(running, timeout=grace)
            # 4. hard stop: cancel what is left; each job releases itself back to waiting
            if pending:
                log.warning("grace of %ss elapsed: cancelling %d running job(s)", grace, len(pending))
                self._hard_stopping = True
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=10.0)
        # 5. plumbing: flush completions, then the rest
        self._plumbing_stopped = True
        await self._cancel_all(self._plumbing)
        await cancel_detached()
        if self._completions is not None and self._completer is not None:
            self._completions.put_nowait(None)
            await asyncio.gather(self._completer, return_exceptions=True)
        for job_id, waiter in list(self._waiters.items()):
            for fut in waiter.futures:
                if not fut.done():
                    fut.set_result(JobStatus(job_id=job_id, state="unknown", waited=True))
        await self.store.close()
        log.info("corral runtime %s stopped", self.worker_id)

    @staticmethod
    async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tasks.clear()

    def _require_started(self) -> None:
        if not self._started or self._stopped:
            raise CorralRuntimeError("the runtime is not running: use `async with runtime:` or `await runtime.start()`")

    # -- producing ------------------------------------------------------------------------------

    @staticmethod
    def _encode(what: str, kind: JobKind, args: Mapping[str, Any]) -> str:
        try:
            kind.signature.bind(None, **args)
        except TypeError as exc:
            raise JobArgumentError(
                f"{what} do not fit job kind {kind.name!r} ({kind.fn.__qualname__}): {exc}"
            ) from None
        try:
            return json.dumps(args, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            pass
        for name, value in args.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise JobArgumentError(
                    f"argument {name!r} of job kind {kind.name!r} is not JSON ({type(value).__name__}): {exc}; "
                    "job arguments are stored as JSON, pass ids or plain data"
                ) from None
        raise JobArgumentError(f"{what} of job kind {kind.name!r} are not JSON")

    async def enqueue(
        self, kind: str, /, *, key: str | None = None, delay: float | None = None, conn: Any = None, **args: Any
    ) -> int:
        """Store a job of ``kind`` with JSON ``args``; return its id. ``key`` groups jobs for ``per_key``;
        ``delay`` (seconds) postpones the first run. ``conn`` (PostgreSQL: a ``psycopg.AsyncConnection``
        inside the caller's transaction) makes the job exist if and only if that transaction commits."""
        job_kind = self._kinds.get(kind)
        if job_kind is None:
            raise UnknownJobKind(
                f"unknown job kind {kind!r}; declared kinds: {', '.join(sorted(self._kinds)) or 'none'}"
            )
        args_json = self._encode("arguments", job_kind, args)
        if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH):
            raise JobArgumentError(
                f"key must be a non-empty string of at most {MAX_KEY_LENGTH} characters, got {key!r}"
            )
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay) or delay < 0
        ):
            raise JobArgumentError(f"delay must be a number of seconds >= 0, got {delay!r}")
        self._require_started()
        new = NewJob(
            queue=job_kind.queue,
            kind=kind,
            args_json=args_json,
            key=key,
            run_at=time.time() + (delay or 0.0),
            max_attempts=job_kind.max_attempts,
            lease_seconds=job_kind.lease_seconds,
        )
        (job_id,) = await self.store.enqueue([new], conn=conn)
        if conn is None:  # a job in an uncommitted transaction may never exist: wait() asks the store
            self._remember(job_id, job_kind.queue)
        if not delay:
            self._wake(job_kind.queue)
        return job_id

    async def publish(self, topic: str, payload: Mapping[str, Any], *, conn: Any = None) -> int:
        """Write an event to the outbox; the relay turns it into one job per subscribed kind. ``conn`` as
        for :meth:`enqueue`: the event exists if and only if the caller's transaction commits."""
        check_name("event topic", topic)
        if not isinstance(payload, Mapping):
            raise JobArgumentError(f"event payload must be a JSON object (a dict), got {type(payload).__name__}")
        routes = self._routes.get(topic, [])
        if not routes:
            log.warning("event %r has no subscriber in this runtime; the relay will drop it", topic)
        payload_json: str | None = None
        for route in routes:
            payload_json = self._encode(f"payload of event {topic!r}", self._kinds[route.kind], payload)
        if payload_json is None:
            try:
                payload_json = json.dumps(dict(payload), allow_nan=False, separators=(",", ":"))
            except (TypeError, ValueError) as exc:
                raise JobArgumentError(f"payload of event {topic!r} is not JSON: {exc}") from None
        self._require_started()
        event_id = await self.store.publish(topic, payload_json, conn=conn)
        if self._relay_wake is not None:
            self._relay_wake.set()
        return event_id

    def _remember(self, job_id: int, queue: str) -> None:
        self._job_queues[job_id] = queue
        if len(self._job_queues) > 100_000:
            self._job_queues.popitem(last=False)

    def _wake_later(self, queue: str, seconds: float) -> None:
        # Retries and snoozes of this process's own jobs should not wait for the next poll.
        if queue in self._workers:
            asyncio.get_running_loop().call_later(max(seconds, 0.0) + 0.001, self._wake, queue)

    def _wake(self, queue: str) -> None:
        worker = self._workers.get(queue)
        if worker is not None:
            worker.wake.set()

    # -- notices pushed by the store (other processes' work) -------------------------------------

    def _on_jobs_notice(self, queue: str | None) -> None:
        if queue is not None:
            self._wake(queue)
            return
        for name in self._workers:  # anything may have changed (the store reconnected)
            self._wake(name)
        self._on_events_notice()
        if self._notify_wake is not None and self._waiters:
            self._notify_wake.set()

    def _on_finished_notice(self, job_ids: Sequence[int]) -> None:
        if self._notify_wake is not None and any(job_id in self._waiters for job_id in job_ids):
            self._notify_wake.set()

    def _on_events_notice(self) -> None:
        if self._relay_wake is not None:
            self._relay_wake.set()

    # -- waiting --------------------------------------------------------------------------------

    async def wait(self, job_id: int, *, timeout: float = 2.0) -> JobStatus:
        """Wait up to ``timeout`` seconds for a job to finish (done or failed for good).

        Served by this process's single notifier. When the job's queue already has
        ``max_waiters`` waiters, answers at once with ``waited=False`` instead of queueing.
        """
        self._require_started()
        queue = self._job_queues.get(job_id)
        if queue is None:
            states = await self.store.job_states([job_id])
            found = states.get(job_id)
            if found is None:
                return JobStatus(job_id=job_id, state="unknown", waited=False, error="no such job")
            queue = found.queue
            if found.state in (DONE, FAILED):
                return self._status(job_id, found.state, found.result_json, found.error)
        if self._waiter_counts[queue] >= self.max_waiters:
            return JobStatus(job_id=job_id, state="not-waited", waited=False)
        fut: asyncio.Future[JobStatus] = asyncio.get_running_loop().create_future()
        waiter = self._waiters.setdefault(job_id, _Waiter(queue=queue))
        waiter.futures.append(fut)
        self._waiter_counts[queue] += 1
        if self._notify_wake is not None:
            self._notify_wake.set()
        try:
            # asyncio.wait, not wait_for: a caller's cancellation must never turn into "pending"
            await asyncio.wait([fut], timeout=timeout)
            return fut.result() if fut.done() else JobStatus(job_id=job_id, state="pending", waited=True)
        finally:
            self._waiter_counts[queue] -= 1
            if fut in waiter.futures:
                waiter.futures.remove(fut)
            if not waiter.futures and self._waiters.get(job_id) is waiter:
                del self._waiters[job_id]

    @staticmethod
    def _status(job_id: int, state: str, result_json: str | None, error: str | None) -> JobStatus:
        result = json.loads(result_json) if result_json is not None else None
        return JobStatus(job_id=job_id, state=state, waited=True, result=result, error=error)

    def _resolve(self, job_id: int, state: str, result_json: str | None, error: str | None) -> None:
        waiter = self._waiters.get(job_id)
        if waiter is None:
            return
        status = self._status(job_id, state, result_json, error)
        for fut in waiter.futures:
            if not fut.done():
                fut.set_result(status)

    async def _notify_loop(self) -> None:
        """The one shared notifier: one query for every job somebody waits on, per tick (polling) or per
        completion notice that names a waited job (pushed, with a slow poll as the fallback)."""
        assert self._notify_wake is not None
        while not self._plumbing_stopped:
            if not self._waiters:
                self._notify_wake.clear()
                await self._notify_wake.wait()
            self._notify_wake.clear()  # before reading, so a notice arriving meanwhile is not lost
            try:
                states = await self.store.job_states(list(self._waiters))
            except Exception:
                log.exception("notifier: reading job states failed")
                states = {}
            for job_id, state in states.items():
                if state.state in (DONE, FAILED):
                    self._resolve(job_id, state.state, state.result_json, state.error)
            if self._pushed:
                await wait_event(self._notify_wake, self.notify_fallback)
            else:
                await asyncio.sleep(self.notify_interval)

    # -- inspection -----------------------------------------------------------------------------

    async def counts(self) -> dict[str, QueueCounts]:
        """Jobs per state for every declared queue (and any other queue found in the store)."""
        self._require_started()
        found = await self.store.counts()
        return {**{name: QueueCounts() for name in self._queues}, **found}

    async def failed_jobs(self, *, limit: int = 50) -> list[FailedJob]:
        self._require_started()
        return await self.store.failed(limit=limit)

    # -- working --------------------------------------------------------------------------------

    async def _work_queue(self, worker: _QueueWorker) -> None:
        queue = worker.queue
        # Adaptive polling, for jobs enqueued by other processes: right after finding work the
        # next look comes after hot_poll, then the interval doubles up to queue.poll when idle.
        # When the store pushes notices of new jobs, polling is only the fallback: every queue.poll.
        hot_poll = queue.poll if self._pushed else self.hot_poll
        idle_wait = queue.poll
        while not self._stopping:
            worker.wake.clear()  # before claiming, so a wake during the claim is not lost
            free = queue.max_workers - len(worker.running)
            claimed: list[ClaimedJob] = []
            if free > 0:
                try:
                    claimed = await self.store.claim(queue.name, free, self.worker_id)
                except Exception:
                    log.exception("queue %s: claim failed; retrying after the poll interval", queue.name)
                for job in claimed:
                    task = spawn(self._execute(worker, job), name=f"corral:job:{job.kind}:{job.id}")
                    worker.running[job.id] = task
                    task.add_done_callback(functools.partial(self._job_done, worker, job.id))
                if claimed:
                    idle_wait = hot_poll
                    if len(claimed) == free:
                        continue  # there may be more; the next pass waits only if every slot is busy
            if self._stopping:
                break
            wait = queue.poll if free <= 0 else min(idle_wait, queue.poll)
            if not await wait_event(worker.wake, wait) and free > 0:
                idle_wait = min(idle_wait * 2, queue.poll)

    @staticmethod
    def _job_done(worker: _QueueWorker, job_id: int, _task: asyncio.Task[None]) -> None:
        worker.running.pop(job_id, None)
        worker.wake.set()  # a slot is free

    async def _execute(self, worker: _QueueWorker, job: ClaimedJob) -> None:
        kind = self._kinds.get(job.kind)
        if kind is None:
            await self._settle_failure(job, f"job kind {job.kind!r} is not declared in this process", None)
            return
        queue = worker.queue
        leased_key: str | None = None
        try:
            if queue.per_key is not None and job.key is not None:
                acquired = await self.store.acquire_key_lease(
                    queue.name, job.key, holder=job.id, limit=queue.per_key, seconds=kind.lease_seconds
                )
                if not acquired:
                    await self.store.snooze(job.id, job.token, seconds=self.key_busy_snooze)
                    self.stats.snoozed += 1
                    self._wake_later(queue.name, self.key_busy_snooze)
                    return
                leased_key = job.key
            await self._run_job(kind, job)
        except asyncio.CancelledError:
            if not self._hard_stopping:
                raise
            # interrupted by the hard stop: back to waiting, attempt refunded
            try:
                await self.store.release(job.id, job.token)
                self.stats.released += 1
            except Exception:
                log.exception("job %s: release after hard stop failed; its lease will expire", job.id)
            raise
        except Exception:
            log.exception(
                "job %s (%s): settling failed; its lease will expire and it will be rescued", job.id, job.kind
            )
        finally:
            if leased_key is not None:
                try:
                    await self.store.release_key_lease(queue.name, leased_key, holder=job.id)
                except (Exception, asyncio.CancelledError):
                    log.warning("job %s: key lease not released; it expires on its own", job.id)

    async def _run_job(self, kind: JobKind, job: ClaimedJob) -> None:
        ctx = JobContext(
            runtime=self,
            job_id=job.id,
            kind=job.kind,
            queue=job.queue,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            key=job.key,
        )
        started = time.monotonic()
        try:
            args = json.loads(job.args_json)
            if kind.is_async:
                result = await asyncio.wait_for(_contain(kind.fn(ctx, **args)), kind.timeout)
            else:
                thread_done = run_in_thread(
                    functools.partial(kind.fn, ctx, **args), name=f"corral-job-{job.kind}-{job.id}"
                )
                try:
                    result = await asyncio.wait_for(asyncio.shield(thread_done), kind.timeout)
                except asyncio.TimeoutError:
                    # Python cannot kill a thread: record the timeout now, keep the slot taken
                    # until the thread really returns.
                    ctx.request_stop()
                    await self._settle_failure(
                        job, f"TimeoutError: sync job exceeded its timeout of {kind.timeout:g}s", None
                    )
                    await asyncio.wait([thread_done])
                    return
                except asyncio.CancelledError:
                    ctx.request_stop()
                    raise
        except asyncio.TimeoutError as exc:
            if time.monotonic() - started >= kind.timeout * 0.999:
                await self._settle_failure(job, f"TimeoutError: job exceeded its timeout of {kind.timeout:g}s", None)
            else:
                await self._settle_failure(job, *_describe_error(exc))
            return
        except asyncio.CancelledError as exc:
            if self._hard_stopping:
                raise
            # the job cancelled itself (or something it awaited): a failure like any other
            await self._settle_failure(job, *_describe_error(exc))
            return
        except BaseException as exc:
            await self._settle_failure(job, *_describe_error(exc))
            return
        try:
            result_json = None if result is None else json.dumps(result, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            await self._settle_failure(job, f"result of job kind {job.kind!r} is not JSON: {exc}", None)
            return
        assert self._completions is not None
        self._completions.put_nowait(Completion(job_id=job.id, token=job.token, result_json=result_json))

    async def _settle_failure(self, job: ClaimedJob, error: str, trace: str | None) -> None:
        final = job.attempt >= job.max_attempts
        retry_at = None if final else time.time() + retry_delay(job.attempt, base=self.retry_base, cap=self.retry_cap)
        log.warning(
            "job %s (%s) attempt %d/%d failed%s: %s",
            job.id,
            job.kind,
            job.attempt,
            job.max_attempts,
            " for good" if final else ", will retry",
            error,
        )
        self.stats.failed_attempts += 1
        await self.store.fail(job.id, job.token, error=error, traceback=trace, retry_at=retry_at)
        if retry_at is not None:
            self._wake_later(job.queue, retry_at - time.time())
        if final:
            self._resolve(job.id, FAILED, None, error)

    async def _complete_loop(self) -> None:
        """Batch completions: every completion waiting when the store is free goes in one transaction."""
        assert self._completions is not None
        closing = False
        while not closing:
            first = await self._completions.get()
            batch: list[Completion] = []
            if first is None:
                closing = True
            else:
                batch.append(first)
            while not self._completions.empty():
                item = self._completions.get_nowait()
                if item is None:
                    closing = True
                else:
                    batch.append(item)
            if not batch:
                continue
            try:
                await self.store.complete(batch)
            except Exception:
                log.exception(
                    "recording %d completion(s) failed; their leases will expire and they will rerun", len(batch)
                )
                continue
            self.stats.completed += len(batch)
            for done in batch:
                self._resolve(done.job_id, DONE, done.result_json, None)

    # -- plumbing loops -------------------------------------------------------------------------

    async def _relay_loop(self) -> None:
        """Move outbox rows into jobs, at most ``relay_batch`` per pass (one short transaction each)."""
        assert self._relay_wake is not None
        while not self._stopped:
            self._relay_wake.clear()
            try:
                moved = await self.store.relay(self._routes, limit=self.relay_batch)
            except Exception:
                log.exception("relay pass failed")
                moved = None
            if moved is not None and moved.events:
                self.stats.relay_passes.append(moved.events)
                for queue in {route.queue for routes in self._routes.values() for route in routes}:
                    self._wake(queue)
                if moved.events >= self.relay_batch:
                    await asyncio.sleep(0)  # more rows wait: next pass at once, but let others run
                    continue
            await wait_event(self._relay_wake, self.relay_interval)

    async def _rescue_loop(self) -> None:
        """Make running jobs whose lease expired (their worker died) retryable; prune old done jobs."""
        passes = 0
        while not self._plumbing_stopped:
            try:
                rescued = await self.store.rescue_expired()
                if rescued:
                    self.stats.rescued += rescued
                    log.warning("rescued %d job(s) whose lease expired", rescued)
                    for name in self._workers:
                        self._wake(name)
                if passes % 100 == 0:
                    await self.store.prune_done(older_than=self.keep_done)
            except Exception:
                log.exception("rescuer pass failed")
            passes += 1
            await asyncio.sleep(self.rescue_interval)

    async def _periodic_loop(self) -> None:
        tick = min(1.0, min(spec.every for spec in self._periodic) / 2)
        while not self._plumbing_stopped:
            try:
                job_ids = await self.store.schedule_periodic(self._periodic)
                if job_ids:
                    for spec in self._periodic:
                        self._wake(spec.queue)
            except Exception:
                log.exception("periodic scheduling failed")
            await asyncio.sleep(tick)
