"""The :class:`Runtime`: the facade of the job runtime, and the order in which its services start and stop.

Owns the public calls (``start``/``stop``, ``enqueue``/``publish``, ``wait``, the inspections), the
boot check, and the wiring: which service gets which store, config and wake-up callback. The work
itself is done by one service per module: the claim loop of each queue
(:mod:`corral.runtime.producer`), running one job (:mod:`corral.runtime.executor`), batched
completions (:mod:`corral.runtime.completer`), waiters (:mod:`corral.runtime.waiters`) and the
maintenance loops (:mod:`corral.runtime.maintenance`). Where the runtime is in its life is one
:class:`~corral.runtime.lifecycle.State` (:mod:`corral.runtime.lifecycle`). Shutdown is soft then
hard. Tasks, threads and processes are never created here directly: they come from
:mod:`corral.runtime.infra` (the children of process-isolated attempts: its process pool).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from corral.runtime.budget import Budget, compute_budget
from corral.runtime.completer import Completer
from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import IN_PROCESS, PROCESS, JobKind, KindTable, Queue, declaring_queue
from corral.runtime.enqueueing import JobRequest, UniqueArg, check_priority, check_unique, unique_key
from corral.runtime.errors import (
    BudgetError,
    ConfigError,
    CorralRuntimeError,
    JobArgumentError,
    StoreUnavailable,
    UnknownJobKind,
)
from corral.runtime.events import EventHook, EventHooks, StallEvent
from corral.runtime.executor import JobExecutor
from corral.runtime.includes import import_modules
from corral.runtime.infra import (
    LoopWatchdog,
    ProcessPool,
    cancel_detached,
    default_start_method,
    spawn,
    wait_tasks_or_event,
)
from corral.runtime.isolation import serve_imported, serve_inherited
from corral.runtime.lifecycle import Lifecycle, State
from corral.runtime.maintenance import Canceller, PeriodicScheduler, Pruner, Relay, Rescuer
from corral.runtime.names import check_name
from corral.runtime.payloads import UnstorableJson, encode_json, is_storable_text
from corral.runtime.producer import Producer, Producers
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores import open_store
from corral.runtime.stores.protocol import JOB_IDS, Enqueued, FailedJob, NewJob, QueueCounts, Store
from corral.runtime.waiters import JobStatus, Waiters

__all__ = ["Runtime"]

log = logging.getLogger("corral.runtime")

T = TypeVar("T")

MAX_KEY_LENGTH = 255
# How long stop() waits for jobs it cancelled (hard stop) to release themselves before moving on.
HARD_STOP_WAIT = 10.0
# Seconds the event loop may be held (a blocking call in async code) before the watchdog warns.
LOOP_STALL_WARNING = 0.5


def _encode(what: str, kind: JobKind, args: Mapping[str, Any]) -> str:
    """``args`` as the JSON a job of ``kind`` is stored with; JobArgumentError says which argument is wrong."""
    if kind.keywords is None or not kind.keywords.fits(args.keys()):
        try:
            kind.signature.bind(None, **args)
        except TypeError as exc:
            raise JobArgumentError(
                f"{what} do not fit job kind {kind.name!r} ({kind.fn.__qualname__}): {exc}"
            ) from None
    try:
        return encode_json(args)
    except UnstorableJson as whole:
        for name, value in args.items():
            try:
                encode_json(value)
            except UnstorableJson as exc:
                raise JobArgumentError(
                    f"argument {name!r} of job kind {kind.name!r} {exc}; "
                    "job arguments are stored as JSON, pass ids or plain data"
                ) from None
        raise JobArgumentError(f"{what} of job kind {kind.name!r}: the whole {whole}") from None


class Runtime:
    """The job runtime of one process. ``async with runtime:`` starts it; leaving stops it.

    The keywords are the fields of :class:`~corral.runtime.config.RuntimeConfig` (``runtime.config``),
    where each is described with its unit. ``max_conns``/``reserve``/``relay`` feed the boot check
    (:func:`corral.runtime.budget.compute_budget`): the workers of the queues this process runs plus
    ``relay`` must fit in ``max_conns * reserve``. When the store draws from a connection pool, the
    pool's real ``max_size`` is ``max_conns``. ``migrate=True`` creates or upgrades the store's schema
    at start (else ``corral migrate``). ``include=["app.jobs"]`` names the modules that declare job
    kinds on the queues; ``start()`` imports them first.
    """

    def __init__(
        self,
        *,
        queues: Sequence[Queue],
        store: str | Store,
        include: Sequence[str] = (),
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
        unknown_kind_snooze: float = 30.0,
        retry_base: float = 1.0,
        retry_cap: float = 3600.0,
        keep_done: float = 7 * 86400.0,
        notify_fallback: float = 1.0,
        enqueue_timeout: float = 10.0,
        prune_interval: float = 600.0,
        max_crashes: int = 3,
        max_retries_requested: int = 25,
        migrate: bool = False,
        worker_id: str | None = None,
        on_event: EventHook | Sequence[EventHook] | None = None,
    ) -> None:
        self.config = RuntimeConfig(
            queues=queues,
            include=include,
            max_conns=max_conns,
            relay=relay,
            reserve=reserve,
            grace=grace,
            max_waiters=max_waiters,
            relay_batch=relay_batch,
            relay_interval=relay_interval,
            rescue_interval=rescue_interval,
            notify_interval=notify_interval,
            hot_poll=hot_poll,
            key_busy_snooze=key_busy_snooze,
            unknown_kind_snooze=unknown_kind_snooze,
            retry_base=retry_base,
            retry_cap=retry_cap,
            keep_done=keep_done,
            notify_fallback=notify_fallback,
            enqueue_timeout=enqueue_timeout,
            prune_interval=prune_interval,
            max_crashes=max_crashes,
            max_retries_requested=max_retries_requested,
            migrate=migrate,
            worker_id=worker_id,
            on_event=on_event,
        )
        config = self.config
        self.store: Store = open_store(store, max_conns=config.max_conns)
        self.max_conns = self.store.pool_size or config.max_conns
        self.worker_id = config.worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stats = RuntimeStats()
        self._events = EventHooks(config.hooks)
        self._lifecycle = Lifecycle()
        self._deadlines = _CallDeadlines(config.enqueue_timeout)
        self._grace_ended = asyncio.Event()  # end_grace(): the soft stop waits no longer
        # True when the store pushes other processes' notices (PostgreSQL LISTEN): polling is then
        # only the fallback, at each queue's `poll`. The notices arrive only once the store is open,
        # when every service below exists.
        self._pushed = self.store.watch(
            on_jobs=self._on_jobs_notice, on_finished=self._on_finished_notice, on_events=self._on_events_notice
        )
        self._kinds = KindTable(config.queues)  # live: kinds declared after Runtime(...) are known
        self._producers = Producers()
        start_method = default_start_method()
        # The children of isolation="process" attempts. Forked, a child finds the job function in the kinds
        # it inherited (and one forked before a kind was declared is retired); spawned, it imports it.
        self._pool = ProcessPool(
            serve=functools.partial(serve_inherited, self._kinds) if start_method == "fork" else serve_imported,
            start_method=start_method,
            generation=lambda: self._kinds.generation,
        )
        self._waiters = Waiters(store=self.store, config=config, lifecycle=self._lifecycle, pushed=self._pushed)
        self._completer = Completer(store=self.store, stats=self.stats, waiters=self._waiters, events=self._events)
        self._executor = JobExecutor(
            runtime=self,
            store=self.store,
            config=config,
            lifecycle=self._lifecycle,
            stats=self.stats,
            completer=self._completer,
            waiters=self._waiters,
            wake_later=self._producers.wake_later,
            pool=self._pool,
            events=self._events,
        )
        self._relay = Relay(
            store=self.store, config=config, lifecycle=self._lifecycle, stats=self.stats, wake=self._producers.wake
        )
        self._rescuer = Rescuer(
            store=self.store,
            config=config,
            lifecycle=self._lifecycle,
            stats=self.stats,
            wake_all=self._producers.wake_all,
            renew_in_flight=self._executor.renew_in_flight,
            crash_kinds=lambda: [kind.name for kind in self._kinds.values() if kind.isolation == IN_PROCESS],
            events=self._events,
        )
        self._pruner = Pruner(store=self.store, config=config, lifecycle=self._lifecycle)
        self._canceller = Canceller(
            store=self.store,
            lifecycle=self._lifecycle,
            running_job_ids=self._executor.running_job_ids,
            runs_any=self._executor.runs_any,
            cancel=self._executor.cancel,
        )
        self._periodic = PeriodicScheduler(
            store=self.store, config=config, lifecycle=self._lifecycle, wake=self._producers.wake
        )
        # The tasks stop() ends, by the step that ends them.
        self._relay_tasks: list[asyncio.Task[None]] = []
        self._claim_loops: list[asyncio.Task[None]] = []
        self._plumbing: list[asyncio.Task[None]] = []
        self._completer_task: asyncio.Task[None] | None = None
        self._worked: tuple[str, ...] = ()  # the queues start() works
        self._watchdog = LoopWatchdog(
            threshold=LOOP_STALL_WARNING, on_stall=self._executor.renew_while_loop_held, after_stall=self._stalled
        )

    # -- declarations ---------------------------------------------------------------------------

    @property
    def queues(self) -> dict[str, Queue]:
        return dict(self.config.queues_by_name)

    @property
    def kinds(self) -> dict[str, JobKind]:
        """Every job kind of the queues, by name, including kinds declared after the runtime was built."""
        return dict(self._kinds)

    def budget(self, queues: Sequence[str] | None = None) -> Budget:
        """The connection budget of this process when it runs ``queues`` (default: all)."""
        by_name = self.config.queues_by_name
        names = list(by_name) if queues is None else list(queues)
        return compute_budget(
            [(name, by_name[name].max_workers) for name in names],
            relay=self.config.relay,
            max_conns=self.max_conns,
            reserve=self.config.reserve,
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
        if self._lifecycle.state is not State.CREATED:
            raise CorralRuntimeError("runtime already started (a Runtime starts once)")
        by_name = self.config.queues_by_name
        names = list(by_name) if queues is None else list(dict.fromkeys(queues))
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise ConfigError(f"unknown queue(s) {', '.join(map(repr, unknown))}; declared: {', '.join(by_name)}")
        # the job modules first: every kind is known before anything is claimed, relayed or scheduled,
        # and before the pool forks the children that inherit the kinds
        import_modules("include", self.config.include)
        budget = self.budget(names)
        if not budget.ok:
            raise BudgetError(
                f"refusing to start: workers plus relay exceed the connection budget: {budget.describe()}. "
                "Lower max_workers or relay, or raise max_conns."
            )
        self._lifecycle.enter(State.STARTING)
        try:
            if self.config.migrate:
                await self.store.migrate()
            await self.store.open()
        except BaseException:
            self._lifecycle.enter(State.CREATED)  # nothing runs yet: start() may be called again
            raise
        self._lifecycle.enter(State.RUNNING)
        # one child ahead per worker slot that may run a process-isolated kind (more start on demand)
        self._pool.start(
            ahead=sum(
                by_name[name].max_workers
                for name in names
                if any(kind.isolation == PROCESS for kind in by_name[name].kinds.values())
            )
        )
        self._events.start()
        self._worked = tuple(names)
        self._watchdog.start()
        self._completer_task = spawn(self._completer.run(), name="corral:completer")
        self._plumbing.append(spawn(self._waiters.run(), name="corral:notifier"))
        self._plumbing.append(spawn(self._rescuer.run(), name="corral:rescuer"))
        self._plumbing.append(spawn(self._pruner.run(), name="corral:pruner"))
        self._plumbing.append(spawn(self._canceller.run(), name="corral:canceller"))
        self._plumbing.append(spawn(self._periodic.run(), name="corral:periodic"))
        for index in range(self.config.relay):
            self._relay_tasks.append(spawn(self._relay.run(), name=f"corral:relay-{index}"))
        for name in names:
            producer = Producer(
                queue=by_name[name],
                store=self.store,
                executor=self._executor,
                completer=self._completer,
                config=self.config,
                lifecycle=self._lifecycle,
                worker_id=self.worker_id,
                pushed=self._pushed,
            )
            self._producers.add(producer)
            self._claim_loops.append(spawn(producer.run(), name=f"corral:queue:{name}"))
        log.info("corral runtime %s started: %s", self.worker_id, budget.describe())

    async def stop(self, grace: float | None = None) -> None:
        """Stop the relay, stop claiming, wait up to ``grace`` seconds for running jobs, then cancel
        them; cancelled jobs go back to waiting without spending an attempt."""
        if self._lifecycle.state is not State.RUNNING:
            return
        self._lifecycle.enter(State.STOPPING)
        grace = self.config.grace if grace is None else grace
        # 1. the relay first: no new jobs appear from the outbox while we drain
        await self._cancel_all(self._relay_tasks)
        # 2. stop claiming
        self._lifecycle.enter(State.DRAINING)
        self._pool.drain()  # a child killed from now on is not replaced
        self._producers.wake_all()
        await asyncio.gather(*self._claim_loops, return_exceptions=True)
        # 3. soft stop: let running jobs finish, up to grace
        running = self._producers.running_jobs()
        if running:
            pending = await wait_tasks_or_event(running, timeout=grace, event=self._grace_ended)
            # 4. hard stop: cancel what is left; each job releases itself back to waiting
            if pending:
                why = "the grace was ended" if self._grace_ended.is_set() else f"grace of {grace}s elapsed"
                log.warning("%s: cancelling %d running job(s)", why, len(pending))
                self._lifecycle.enter(State.CANCELLING)
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=HARD_STOP_WAIT)
        for job in self._executor.abandoned():
            # Python cannot kill a thread, nor a task that ignores its cancellation: say what is left
            log.error(
                "stopping with job %s (%s) attempt %d still running; it dies with the process",
                job.id,
                job.kind,
                job.attempt,
            )
        # every attempt is settled or released by now: the children left are idle (or abandoned) ones
        await self._pool.stop()
        # 5. plumbing: flush completions, then the rest
        self._lifecycle.enter(State.CLOSING)
        await self._cancel_all(self._plumbing)
        await cancel_detached()
        if self._completer_task is not None:
            self._completer.finish()
            await asyncio.gather(self._completer_task, return_exceptions=True)
        self._waiters.answer_unknown()
        await self.store.close()
        await self._watchdog.stop()
        await self._events.stop()
        self._lifecycle.enter(State.STOPPED)
        log.info("corral runtime %s stopped", self.worker_id)

    def end_grace(self) -> None:
        """End the soft stop of a :meth:`stop` now, or make the next one end at once: the jobs still
        running are cancelled and released back to waiting, as when its grace runs out (``corral
        worker`` calls it on a second SIGINT or SIGTERM)."""
        self._grace_ended.set()

    def loop_held_seconds(self) -> float:
        """How long job code has held this runtime's event loop now (0 while it runs freely), from any thread."""
        return self._watchdog.held_seconds()

    def release_blocking(self) -> int:
        """Put every job this process runs or has claimed back to waiting, their attempts not spent, blocking,
        from a thread other than the loop's: ``corral worker`` calls it when its stop is overdue because
        job code holds the loop, just before it ends its process. Return how many jobs went back."""
        return self._executor.release_blocking()

    def _stalled(self, seconds: float) -> None:
        self._events.emit(StallEvent(queues=self._worked, duration=seconds, at=time.time()))

    @staticmethod
    async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tasks.clear()

    # -- producing ------------------------------------------------------------------------------

    def _unknown(self, kind: str) -> UnknownJobKind:
        known = ", ".join(sorted(self._kinds)) or "none"
        queue = declaring_queue(kind)
        if queue is not None and self.config.queues_by_name.get(queue.name) is not queue:
            return UnknownJobKind(
                f"job kind {kind!r} is declared on queue {queue.name!r}, which is not one of this runtime's "
                f"queues ({', '.join(self.config.queues_by_name) or 'none'}): pass that Queue object in "
                f"Runtime(queues=[...]); declared kinds: {known}"
            )
        return UnknownJobKind(f"unknown job kind {kind!r}; declared kinds: {known}")

    async def enqueue(
        self,
        kind: str,
        /,
        *,
        key: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: UniqueArg | None = None,
        conn: Any = None,
        **args: Any,
    ) -> Enqueued:
        """Store a job of ``kind`` with JSON ``args``; return its id (an ``int``). ``key`` groups jobs for
        ``per_key``; ``delay`` (seconds) postpones the first run; ``priority`` (0..3, default the kind's)
        puts it ahead of lower ones in its queue. ``unique`` (default the kind's): True or ``"by-args"``
        (the kind and its arguments), a key string (per kind) or ``{"key": ..., "states": [...], "for":
        seconds}``; while a job with the same unique key is waiting, running or retrying (or in
        ``states``), nothing is inserted and the answer is that job's id with ``.duplicate`` True.
        ``conn`` (PostgreSQL: a ``psycopg.AsyncConnection`` inside the caller's transaction) makes the
        job exist if and only if that transaction commits."""
        request = JobRequest(kind, key=key, delay=delay, priority=priority, unique=unique, **args)
        return (await self._enqueue([request], conn=conn, what=f"enqueue of a {kind!r} job"))[0]

    async def enqueue_many(self, jobs: Sequence[JobRequest], /, *, conn: Any = None) -> list[Enqueued]:
        """Store every job of ``jobs`` (:class:`JobRequest`, each with ``enqueue``'s keywords) in one
        transaction and one round trip to the store: all or none. Return their ids in order, as
        :meth:`enqueue` answers each (a duplicate: the holder's id, ``.duplicate`` True; a unique key
        twice in the batch: the first job's). ``conn`` as for :meth:`enqueue`."""
        if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
            raise JobArgumentError(f"enqueue_many takes a list of JobRequest, got {type(jobs).__name__}")
        if not jobs:
            return []
        return await self._enqueue(jobs, conn=conn, what=f"enqueue_many of {len(jobs)} job(s)")

    def _new_job(self, request: JobRequest, now: float) -> NewJob:
        """``request`` checked and encoded as the store takes it; JobArgumentError says what is wrong."""
        if not isinstance(request, JobRequest):
            raise JobArgumentError(f"enqueue_many takes JobRequest items, got {type(request).__name__}")
        kind, key, delay = request.kind, request.key, request.delay
        job_kind = self._kinds.get(kind)
        if job_kind is None:
            raise self._unknown(kind)
        args_json = _encode("arguments", job_kind, request.args)
        if key is not None and (
            not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH or not is_storable_text(key)
        ):
            raise JobArgumentError(
                f"key must be a non-empty string of at most {MAX_KEY_LENGTH} characters, "
                f"without NUL or lone surrogates, got {key!r}"
            )
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay) or delay < 0
        ):
            raise JobArgumentError(f"delay must be a number of seconds >= 0, got {delay!r}")
        # The kind's own priority and unique were checked when it was declared.
        priority, unique = job_kind.priority, job_kind.unique
        if request.priority is not None:
            priority = check_priority(f"job of kind {kind!r}", request.priority, JobArgumentError)
        if request.unique is not None:
            unique = check_unique(f"job of kind {kind!r}", request.unique, JobArgumentError)
        return NewJob(
            queue=job_kind.queue,
            kind=kind,
            args_json=args_json,
            key=key,
            run_at=now + (delay or 0.0),
            max_attempts=job_kind.max_attempts,
            lease_seconds=job_kind.lease_seconds,
            priority=priority,
            unique_key=None if unique is None else unique_key(unique, kind=kind, args_json=args_json, now=now),
            unique_states=() if unique is None else unique.states,
        )

    async def _enqueue(self, requests: Sequence[JobRequest], *, conn: Any, what: str) -> list[Enqueued]:
        now = time.time()
        jobs = [self._new_job(request, now) for request in requests]
        self._lifecycle.require_running()
        ids = await self._bounded(what, self.store.enqueue(jobs, conn=conn))
        for job, job_id in zip(jobs, ids, strict=True):
            if conn is None:  # a job in an uncommitted transaction may never exist: wait() asks the store
                self._waiters.remember(job_id, job.queue)
            if job.run_at <= now and not job_id.duplicate:
                self._producers.wake(job.queue)
        return ids

    async def cancel(self, *job_ids: int) -> list[int]:
        """Cancel jobs: a waiting or retrying one never runs; a running one (in any process) has its attempt
        stopped (async: its task is cancelled; ``isolation="process"``: its child is killed; in-process
        sync: ``ctx.stop_requested`` becomes true), within about a second where the store cannot push the
        notice. Each ends ``cancelled`` and is not retried, whatever its attempt records afterwards; its
        worker slot is freed once its code has really stopped. Return the ids cancelled now (jobs
        already finished, or unknown, are not)."""
        for job_id in job_ids:
            if isinstance(job_id, bool) or not isinstance(job_id, int):
                raise JobArgumentError(f"cancel takes job ids (integers), got {job_id!r}")
        job_ids = tuple(job_id for job_id in job_ids if job_id in JOB_IDS)  # no store holds another id
        self._lifecycle.require_running()
        cancelled = await self._bounded(f"cancel of {len(job_ids)} job(s)", self.store.cancel(job_ids))
        self._executor.cancel(set(cancelled))  # this process's attempts stop now, not at the next look
        for job_id in cancelled:
            self._waiters.settled(job_id)
        return cancelled

    async def publish(self, topic: str, payload: Mapping[str, Any], *, conn: Any = None) -> int:
        """Write an event to the outbox; the relay turns it into one job per subscribed kind. ``conn`` as
        for :meth:`enqueue`: the event exists if and only if the caller's transaction commits."""
        check_name("event topic", topic)
        if not isinstance(payload, Mapping):
            raise JobArgumentError(f"event payload must be a JSON object (a dict), got {type(payload).__name__}")
        routes = self._relay.routes.get(topic, [])
        if not routes:
            log.warning("event %r has no subscriber in this runtime; the relay will drop it", topic)
        payload_json: str | None = None
        for route in routes:
            payload_json = _encode(f"payload of event {topic!r}", self._kinds[route.kind], payload)
        if payload_json is None:
            try:
                payload_json = encode_json(dict(payload))
            except UnstorableJson as exc:
                raise JobArgumentError(f"payload of event {topic!r} {exc}") from None
        self._lifecycle.require_running()
        event_id = await self._bounded(
            f"publish of a {topic!r} event", self.store.publish(topic, payload_json, conn=conn)
        )
        self._relay.poke()
        return event_id

    async def _bounded(self, what: str, call: Awaitable[T]) -> T:
        """``call``, or StoreUnavailable once it took ``enqueue_timeout``: a store that hangs (a server
        gone, a lock held elsewhere) must not hang the request that enqueues."""
        deadlines = self._deadlines
        task = deadlines.enter()
        try:
            return await call
        except asyncio.CancelledError:
            if not deadlines.expired(task):
                raise
            timeout = deadlines.timeout
            raise StoreUnavailable(
                f"{what}: the store {self.store!r} did not answer within {timeout:g}s (enqueue_timeout); "
                "the write may still have happened"
            ) from TimeoutError(f"enqueue_timeout of {timeout:g}s")
        finally:
            deadlines.leave(task)

    # -- notices pushed by the store (other processes' work) -------------------------------------

    def _on_jobs_notice(self, queue: str | None) -> None:
        if queue is not None:
            self._producers.wake(queue)
            return
        # anything may have changed (the store reconnected)
        self._producers.wake_all()
        self._relay.poke()
        self._waiters.recheck()

    def _on_finished_notice(self, job_ids: Sequence[int]) -> None:
        self._waiters.on_finished_notice(job_ids)
        self._canceller.on_finished(job_ids)  # a job cancelled elsewhere may run here

    def _on_events_notice(self) -> None:
        self._relay.poke()

    # -- waiting --------------------------------------------------------------------------------

    async def wait(self, job_id: int, *, timeout: float = 2.0) -> JobStatus:
        """Wait up to ``timeout`` seconds for a job to finish (done, failed for good or cancelled).

        Served by this process's single notifier. When the job's queue already has
        ``max_waiters`` waiters, answers at once with ``waited=False`` instead of queueing. A timeout
        answers ``state="pending"``; a store that cannot be read meanwhile raises ``StoreUnavailable``.
        """
        self._lifecycle.require_running()
        return await self._waiters.wait(job_id, timeout=timeout)

    # -- inspection -----------------------------------------------------------------------------

    async def counts(self) -> dict[str, QueueCounts]:
        """Jobs per state for every declared queue (and any other queue found in the store)."""
        self._lifecycle.require_running()
        found = await self.store.counts()
        return {**{name: QueueCounts() for name in self.config.queues_by_name}, **found}

    async def failed_jobs(self, *, limit: int = 50) -> list[FailedJob]:
        self._lifecycle.require_running()
        return await self.store.failed(limit=limit)


class _CallDeadlines:
    """The ``enqueue_timeout`` of the store calls in flight (enqueue, cancel, publish): one timer for all
    of them, not one per call. A timer per call, made and cancelled, cost 7 us of every enqueue's
    client CPU. Every call has the same timeout, so the calls in flight are in the order of their
    deadlines (a dict keeps insertion order): the timer looks at the first and, once it has cancelled
    the overdue ones, waits for the next first one."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._deadlines: dict[asyncio.Task[Any], float] = {}  # the calling task -> its deadline (loop time)
        self._overdue: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def enter(self) -> asyncio.Task[Any]:
        """Start the clock of a call made by the current task (one at a time per task)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None
        deadline = loop.time() + self.timeout
        self._deadlines[task] = deadline
        if self._timer is None or self._timer_loop is not loop:
            self._timer_loop = loop
            self._timer = loop.call_at(deadline, self._expire)
        return task

    def leave(self, task: asyncio.Task[Any]) -> None:
        self._deadlines.pop(task, None)
        self._overdue.discard(task)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """True when ``task`` was cancelled because its call passed the timeout (the cancel is then
        taken back, so the task's own timeouts and task groups are not confused by it)."""
        if task not in self._overdue:
            return False
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
        return True

    def _expire(self) -> None:
        self._timer = None
        loop = self._timer_loop
        assert loop is not None
        now = loop.time()
        for task, deadline in list(self._deadlines.items()):
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            del self._deadlines[task]
            self._overdue.add(task)
            task.cancel()
