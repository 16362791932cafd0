"""The job executor: runs one attempt of a claimed job from its key lease to its settlement.

Owns what happens to an attempt between its claim and its record, all of it scoped to the attempt
(the job's id and claim token), never to the job id alone: taking and releasing the per-key lease
under the attempt's holder (snoozing the job when the key is busy), running the job's code under its
hard timeout (``isolation="process"``: a child of the runtime's pool, killed with SIGKILL at the
timeout; in-process async: its own task, cancelled at the timeout and recorded stuck when it ignores
the cancellation; in-process sync: its own thread), renewing the attempt's job and key leases for as
long as that code really runs, so the attempt keeps its slot until then, turning every exception,
every run past its timeout and every crashed child into a failed attempt with a retry time
(:func:`retry_delay`) or, at ``max_crashes``, a failed job, honouring what the job asked for itself
(``raise Discard``: failed for good; ``raise Retry``: put back for later with its attempt refunded, up to
``max_retries_requested`` times), handing results to the completer, stopping an attempt whose job was
cancelled (:meth:`JobExecutor.cancel`: an async task is cancelled, a child is killed, a sync job's
``ctx.stop_requested`` is set; its slot stays taken until its code ends), releasing a job the hard stop
interrupted, and reporting each step (events for the ``on_event`` hooks, log lines with structured
fields). Claiming is the producer's business.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import random
import time
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral.runtime.completer import Completer, Finished
from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import PROCESS, JobContext, JobKind, KindTable, Queue
from corral.runtime.errors import Discard, Retry
from corral.runtime.events import EventHooks, log_fields
from corral.runtime.infra import (
    EXIT_PAST_DEADLINE,
    ChildExit,
    ProcessAttempt,
    ProcessPool,
    describe_exit,
    run_in_thread,
    spawn,
)
from corral.runtime.isolation import child_request, describe_error
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.payloads import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, UnstorableJson, encode_json, storable_text
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import ClaimedJob, Completion, HeldLease, Store, attempt_holder
from corral.runtime.waiters import Waiters

if TYPE_CHECKING:
    from corral.runtime.runtime import Runtime

__all__ = ["CANCEL_ESCALATION", "JobExecutor", "retry_delay"]

log = logging.getLogger("corral.runtime")

# Seconds between two WARNINGs about jobs of the same unknown kind (a backlog would log one per job).
UNKNOWN_KIND_WARNING_INTERVAL = 60.0

# Seconds an async job cancelled at its timeout may take to end before its attempt is recorded as
# failed and stuck: long enough for cleanup in ``finally`` blocks, short enough that a job that
# swallows its cancellation is reported while its timeout is still news.
CANCEL_ESCALATION = 2.0

# Seconds past its timeout a process-isolated attempt's child ends itself. This process kills it at the
# timeout, but cannot while job code holds its event loop; the margin keeps that kill the usual end.
CHILD_OWN_DEADLINE_MARGIN = 0.5


def retry_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (1-based): exponential, capped, with "equal jitter".

    Half the delay is fixed and half random, so retries of jobs that failed together spread out
    without ever retrying sooner than half the exponential step.
    """
    step = min(cap, base * 2.0 ** max(attempt - 1, 0))
    return step * (0.5 + (rng or random).random() / 2)


class _JobRaisedBaseException(Exception):
    """Carries a BaseException (KeyboardInterrupt, SystemExit, ...) raised by job code, so it is
    recorded like any failure instead of escaping the event loop."""

    def __init__(self, inner: BaseException) -> None:
        super().__init__(f"{type(inner).__name__}: {inner}")
        self.inner = inner


async def _contain(coro: Any, ran: list[float]) -> Any:
    """Await the job's coroutine; note when it began and ended (measured inside its task, so a loop held by
    another job before it began or after it ended does not count against it)."""
    ran.append(time.monotonic())
    try:
        return await coro
    except (Exception, asyncio.CancelledError, GeneratorExit):  # GeneratorExit: closed unfinished at exit
        raise
    except BaseException as exc:
        raise _JobRaisedBaseException(exc) from exc
    finally:
        ran.append(time.monotonic())


def _timed(code: Callable[[], Any], ran: list[float]) -> Any:
    """Run a sync job's ``code`` (in its thread); note when it began and ended, as ``_contain`` does."""
    ran.append(time.monotonic())
    try:
        return code()
    finally:
        ran.append(time.monotonic())


def _describe_error(exc: BaseException) -> tuple[str, str]:
    return describe_error(exc.inner if isinstance(exc, _JobRaisedBaseException) else exc)


def _wake(waiting: asyncio.Future[None], *_: object) -> None:
    """Resolve ``waiting`` (a done callback and a timer share it: whichever comes first wakes the attempt)."""
    if not waiting.done():
        waiting.set_result(None)


@dataclass(slots=True, eq=False)
class _Attempt:
    """One attempt this process runs: the claim, its kind, the key slot it holds (if any), whether its
    job was cancelled, and the future its :meth:`JobExecutor._hold` waits on while cancel can stop it
    (resolved by :meth:`JobExecutor.cancel`). A plain flag and one future per wait, not a future per
    attempt and a two-future ``asyncio.wait``: this is built for every job."""

    job: ClaimedJob
    kind: JobKind
    key: tuple[str, str] | None
    cancel_requested: bool = False
    waiting: asyncio.Future[None] | None = None

    @property
    def lease(self) -> HeldLease:
        """The job lease and key slot this attempt holds while its code runs."""
        job = self.job
        return HeldLease(job_id=job.id, token=job.token, seconds=self.kind.lease_seconds, key=self.key)


class JobExecutor:
    """Runs claimed jobs of this runtime's kinds; one :meth:`execute` call per claimed attempt.

    ``runtime`` is handed to each job's :class:`JobContext` (for ``ctx.enqueue``/``ctx.publish``).
    ``wake_later(queue, seconds)`` asks the queue's claim loop to look again once a retry or a
    snooze of this process's own job is due, instead of at its next poll.
    """

    def __init__(
        self,
        *,
        runtime: Runtime,
        store: Store,
        config: RuntimeConfig,
        lifecycle: Lifecycle,
        stats: RuntimeStats,
        completer: Completer,
        waiters: Waiters,
        wake_later: Callable[[str, float], None],
        pool: ProcessPool,
        events: EventHooks,
    ) -> None:
        self._runtime = runtime
        self._events = events
        self._hooked = bool(events)
        self._pool = pool
        self._store = store
        self._config = config
        self._kinds: Mapping[str, JobKind] = KindTable(config.queues)  # kinds declared after the runtime too
        self._lifecycle = lifecycle
        self._stats = stats
        self._completer = completer
        self._waiters = waiters
        self._wake_later = wake_later
        self._in_flight: dict[tuple[int, int], _Attempt] = {}
        # Every attempt from its claim until its task ends, with the leases it holds: a task claimed while
        # job code holds the loop has not started yet, and its leases must outlive the stall too.
        self._claimed: dict[tuple[int, int], HeldLease] = {}
        self._began: dict[tuple[int, int], float] = {}  # attempt -> when its code started (monotonic)
        self._jobs_in_flight: set[int] = set()  # jobs with an attempt here, from its claim to the end of its code
        self._stuck: set[tuple[int, int]] = set()
        self._abandoned: list[tuple[ClaimedJob, asyncio.Future[Any]]] = []
        self._warned_unknown: dict[str, float] = {}  # kind -> when its last WARNING was logged (monotonic)
        self._renewed_while_held = 0.0  # when renew_while_loop_held last renewed (monotonic)

    def stuck(self) -> list[ClaimedJob]:
        """Attempts recorded failed at their timeout whose code still runs here (each keeps its slot)."""
        return [self._in_flight[attempt].job for attempt in self._stuck if attempt in self._in_flight]

    def abandoned(self) -> list[ClaimedJob]:
        """Attempts the hard stop let go of whose code still runs (a thread, or a task that ignores
        its cancellation): they die with the process."""
        return [job for job, work in self._abandoned if not work.done()]

    def running_job_ids(self) -> list[int]:
        """The ids of the jobs whose attempts this process runs now."""
        return [attempt.job.id for attempt in list(self._in_flight.values())]

    def runs_any(self, job_ids: Sequence[int]) -> bool:
        """Whether one of ``job_ids`` has an attempt here, from its claim to the end of its code (the
        running ones and a few about to run or just ended: a superset of :meth:`running_job_ids`)."""
        return not self._jobs_in_flight.isdisjoint(job_ids)

    def cancel(self, job_ids: Collection[int]) -> int:
        """The store cancelled ``job_ids``: stop this process's attempts of them (each keeps its slot until
        its code has ended); return how many were told."""
        told = 0
        for attempt in list(self._in_flight.values()):
            if attempt.job.id in job_ids and not attempt.cancel_requested:
                attempt.cancel_requested = True
                if attempt.waiting is not None:
                    _wake(attempt.waiting)
                told += 1
        return told

    async def renew_in_flight(self) -> None:
        """Extend the leases of every attempt this process has claimed and not ended (the rescuer calls it
        before each pass, so it never rescues a job this process still runs or is about to run, even
        after the loop was held)."""
        for lease in list(self._claimed.values()):
            await self._renew(lease)

    def renew_while_loop_held(self) -> None:
        """Extend the leases of every attempt this process runs, from the loop watchdog's thread while
        job code holds the event loop (no renewal on the loop can run then): at most every third of
        the shortest lease, so a blocking async job past its timeout is never rescued by another
        process (which would run a second attempt beside it, past its key's ``per_key``)."""
        leases = list(self._claimed.values())  # one C-level copy: safe from the watchdog thread
        if not leases:
            return
        now = time.monotonic()
        if now - self._renewed_while_held < min(lease.seconds for lease in leases) / 3:
            return
        self._renewed_while_held = now
        try:
            self._store.renew_blocking(leases)
        except Exception as exc:
            log.warning("renewing %d lease(s) while the event loop is held failed: %s", len(leases), exc)

    def release_blocking(self) -> int:
        """Put every attempt this process has claimed back to waiting, their attempts not spent, from a
        thread other than the loop's (a worker whose stop is overdue, just before it ends its process);
        return how many went back."""
        leases = list(self._claimed.values())  # one C-level copy: safe from another thread
        return self._store.release_blocking(leases) if leases else 0

    async def _renew(self, lease: HeldLease) -> None:
        try:
            await self._store.renew(lease.job_id, lease.token, seconds=lease.seconds, key=lease.key)
        except Exception:
            log.warning("job %s: renewing its lease failed; retrying at the next renewal", lease.job_id)

    def start(self, queue: Queue, job: ClaimedJob, *, claimed_at: float) -> asyncio.Task[None]:
        """The task running ``job``, claimed from ``queue`` by a claim sent at ``claimed_at`` (monotonic): its
        leases are renewed from now on, also while job code holds the loop before the task has begun, until
        the task ends. A claim whose answer came only after a third of the lease (job code held the loop
        while it was on its way) is put back instead: its leases may have lapsed meanwhile, and another
        process may hold the job or its key's slot now."""
        attempt = (job.id, job.token)
        kind = self._kinds.get(job.kind)
        key = (queue.name, job.key) if queue.per_key is not None and job.key is not None else None
        work: Coroutine[Any, Any, None]
        late = time.monotonic() - claimed_at
        if kind is not None and late > kind.lease_seconds / 3:
            work = self._put_back_late(job, key, late)
        else:
            if kind is not None:  # an unknown kind goes back at once
                lease = HeldLease(job_id=job.id, token=job.token, seconds=kind.lease_seconds, key=key)
                self._claimed[attempt] = lease
            work = self.execute(queue, job)
        task = spawn(work, name=f"corral:job:{job.kind}:{job.id}")
        task.add_done_callback(functools.partial(self._unclaimed, attempt))
        return task

    async def _put_back_late(self, job: ClaimedJob, key: tuple[str, str] | None, late: float) -> None:
        log.warning(
            "job %s (%s): its claim reached this process %.1fs after it was sent (job code held the event loop); "
            "put back to waiting unrun, as its lease may have lapsed meanwhile",
            job.id,
            job.kind,
            late,
        )
        try:
            await self._store.release(job.id, job.token)  # refused (nothing changes) if another process has it
            if key is not None:
                await self._store.release_key_lease(key[0], key[1], holder=attempt_holder(job.id, job.token))
        except Exception:
            log.exception("job %s: putting it back failed; its lease will expire and it will be rescued", job.id)
            return
        self._stats.released += 1

    def _unclaimed(self, attempt: tuple[int, int], _task: asyncio.Task[None]) -> None:
        self._claimed.pop(attempt, None)

    async def execute(self, queue: Queue, job: ClaimedJob) -> None:
        """Run ``job`` (claimed from ``queue``) and settle it; never raises but for the hard stop."""
        kind = self._kinds.get(job.kind)
        if kind is None:
            await self._put_back_unknown(job)
            return
        if job.id in self._jobs_in_flight:
            # an earlier attempt of this job still runs here (stuck past its timeout): the retry waits
            # for it, without spending an attempt, instead of running beside it
            await self._snooze(queue, job)
            return
        self._jobs_in_flight.add(job.id)
        try:
            await self._execute(queue, job, kind)
        finally:
            self._jobs_in_flight.discard(job.id)

    async def _put_back_unknown(self, job: ClaimedJob) -> None:
        """A job of a kind no module imported here declares: another process (or this one, once the module
        is imported) may know it, so it goes back to waiting without spending an attempt, for
        ``unknown_kind_snooze`` seconds so that this process does not claim it again at once. The queue is
        not woken for it: nothing here will know the kind sooner."""
        seconds = self._config.unknown_kind_snooze
        try:
            await self._store.snooze(job.id, job.token, seconds=seconds)
        except Exception:
            log.exception(
                "job %s (%s): putting it back failed; its lease will expire and it will be rescued", job.id, job.kind
            )
            return
        self._stats.unknown_kind_snoozed += 1
        now = time.monotonic()
        warned = self._warned_unknown.get(job.kind)
        if warned is not None and now - warned < UNKNOWN_KIND_WARNING_INTERVAL:
            return
        self._warned_unknown[job.kind] = now
        include = ", ".join(self._config.include) or "none"
        log.warning(
            "job %s: job kind %r is not declared in this process (queue %r); put back to waiting for %gs without "
            "spending an attempt. Import the module that declares it in the worker: Runtime(include=[...]) or "
            "corral worker --include MODULE (included now: %s)",
            job.id,
            job.kind,
            job.queue,
            seconds,
            include,
        )

    async def _snooze(self, queue: Queue, job: ClaimedJob) -> None:
        snooze = self._config.key_busy_snooze
        await self._store.snooze(job.id, job.token, seconds=snooze)
        self._stats.snoozed += 1
        self._events.job("snoozed", job, retry_in=snooze)
        self._wake_later(queue.name, snooze)

    async def _execute(self, queue: Queue, job: ClaimedJob, kind: JobKind) -> None:
        key = (queue.name, job.key) if queue.per_key is not None and job.key is not None else None
        holder = attempt_holder(job.id, job.token)
        leased = False
        try:
            if key is not None:
                leased = await self._store.acquire_key_lease(
                    queue.name, key[1], holder=holder, limit=queue.per_key or 1, seconds=kind.lease_seconds
                )
                if not leased:
                    await self._snooze(queue, job)
                    return
            self._began[job.id, job.token] = time.monotonic()
            if self._hooked:  # no event is built or posted without hooks: this runs for every job
                self._events.job("started", job)
            await self._run(_Attempt(job=job, kind=kind, key=key))
        except asyncio.CancelledError:
            if not self._lifecycle.hard_stopping:
                raise
            # interrupted by the hard stop: back to waiting, attempt refunded
            try:
                await self._store.release(job.id, job.token)
                self._stats.released += 1
            except Exception:
                log.exception("job %s: release after hard stop failed; its lease will expire", job.id)
            self._released(job, "interrupted by the hard stop")
            raise
        except Exception as exc:
            log.exception(
                "job %s (%s): settling failed; its lease will expire and it will be rescued", job.id, job.kind
            )
            self._released(job, f"settling failed: {describe_error(exc)[0]}")
        finally:
            self._began.pop((job.id, job.token), None)
            if leased and key is not None:
                try:
                    await self._store.release_key_lease(queue.name, key[1], holder=holder)
                except (Exception, asyncio.CancelledError):
                    log.warning("job %s: key lease not released; it expires on its own", job.id)

    async def _run(self, attempt: _Attempt) -> None:
        job, kind = attempt.job, attempt.kind
        if job.crashes >= self._config.max_crashes:
            # its worker was lost while it ran there alone, max_crashes times (counted by the rescue)
            await self._settle_failure(
                job,
                f"the job crashed its worker process {job.crashes} times (max_crashes={self._config.max_crashes}): "
                "each time its worker was lost while running it alone",
                None,
                final=True,
            )
            return
        if kind.isolation == PROCESS:
            await self._run_in_child(attempt)
            return
        ctx = JobContext(
            runtime=self._runtime,
            job_id=job.id,
            kind=job.kind,
            queue=job.queue,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            key=job.key,
        )
        started = time.monotonic()
        ran: list[float] = []  # when the job's code began and ended
        work: asyncio.Future[Any]
        try:
            args = json.loads(job.args_json)
            if kind.is_async:
                work = spawn(_contain(kind.fn(ctx, **args), ran), name=f"corral:run:{job.kind}:{job.id}")
            else:
                code = functools.partial(_timed, functools.partial(kind.fn, ctx, **args), ran)
                work = run_in_thread(code, name=f"corral-job-{job.kind}-{job.id}")
        except BaseException as exc:
            await self._settle_exception(job, exc)
            return
        self._in_flight[job.id, job.token] = attempt
        try:
            await self._outcome(attempt, ctx, work, started, ran)
        except asyncio.CancelledError:
            # the hard stop: the attempt's code is asked to stop too; whatever ignores that is left
            # behind with the process (stop() names it)
            ctx.request_stop()
            if kind.is_async:  # a thread's future stays pending until the thread really returns
                work.cancel()
            self._abandoned.append((job, work))
            raise
        finally:
            del self._in_flight[job.id, job.token]
            self._stuck.discard((job.id, job.token))

    async def _run_in_child(self, attempt: _Attempt) -> None:
        """Run the attempt in a child of the pool; past its timeout the child is killed (SIGKILL), and
        the attempt keeps its slot until the child is reaped."""
        job, kind = attempt.job, attempt.kind
        started = time.monotonic()
        try:
            child = self._pool.submit(child_request(job, kind), end_after=kind.timeout + CHILD_OWN_DEADLINE_MARGIN)
        except Exception as exc:
            await self._settle_failure(job, f"cannot start a worker process: {describe_error(exc)[0]}", None)
            return
        self._in_flight[job.id, job.token] = attempt
        try:
            if not await self._hold(attempt, child.reply, until=started + kind.timeout, or_cancel=True):
                returncode = await child.kill()
                status = describe_exit(returncode)
                self._stats.killed_children += 1
                if attempt.cancel_requested:
                    self._record_cancelled(job, f"its worker process {child.pid} was killed ({status})")
                elif returncode == EXIT_PAST_DEADLINE:  # it had ended itself before the loop could kill it
                    await self._settle_failure(job, _ended_itself(kind.timeout, child.pid), None)
                else:
                    await self._settle_failure(
                        job,
                        f"TimeoutError: job exceeded its timeout of {kind.timeout:g}s; "
                        f"its worker process {child.pid} was killed ({status})",
                        None,
                    )
                return
            await child.finish()
            await self._child_outcome(attempt, child, elapsed=time.monotonic() - started)
        except asyncio.CancelledError:
            # the hard stop: the child must be gone (or idle again) before the slot is free
            await child.abandon()
            raise
        finally:
            del self._in_flight[job.id, job.token]

    async def _child_outcome(self, attempt: _Attempt, child: ProcessAttempt, *, elapsed: float) -> None:
        """``elapsed``: seconds from the attempt's submission to its reply (or its child's end), as seen here."""
        job = attempt.job
        exc = child.reply.exception()
        timeout = attempt.kind.timeout
        if isinstance(exc, ChildExit) and exc.returncode == EXIT_PAST_DEADLINE and elapsed > timeout:
            # not a crash: the child ended itself past the timeout, as nothing here could kill it in time
            await self._settle_failure(job, _ended_itself(timeout, child.pid), None)
            return
        if isinstance(exc, ChildExit):
            # exact: the child ran this attempt alone, so the crash is this job's and no other's
            self._stats.crashed_children += 1
            crashes, limit = job.crashes + 1, self._config.max_crashes
            error = f"the job crashed its worker process {child.pid} ({exc})"
            if crashes >= limit:
                error = (
                    f"the job crashed its worker process {crashes} times (max_crashes={limit}); "
                    f"the last one: pid {child.pid} ({exc})"
                )
            await self._settle_failure(job, error, None, crashed=True, final=crashes >= limit)
            return
        if exc is not None:
            await self._settle_failure(job, f"the worker process sent a broken reply: {describe_error(exc)[0]}", None)
            return
        reply = child.reply.result()
        ran = float(reply.get("ran", 0.0))
        if ran > attempt.kind.timeout:
            # the child returned only after its timeout, and nothing killed it in time: job code held this
            # process's event loop meanwhile
            await self._settle_failure(job, _ran_past(ran, attempt.kind.timeout, " in its worker process"), None)
            return
        if "unstorable" in reply:
            await self._settle_failure(job, f"the result of job kind {job.kind!r} {reply['unstorable']}", None)
        elif "error" in reply:
            await self._settle_failure(job, str(reply["error"]), reply.get("traceback"))
        elif "discard" in reply:
            await self._discard(job, reply["discard"])
        elif "retry_after" in reply:
            await self._retry_later(job, float(reply["retry_after"]))
        else:
            self._succeeded(job, reply.get("result"))

    async def _outcome(
        self, attempt: _Attempt, ctx: JobContext, work: asyncio.Future[Any], started: float, ran: list[float]
    ) -> None:
        """``ran``: when the job's code (its coroutine, or its thread for a sync job) began and ended."""
        job, kind = attempt.job, attempt.kind
        if kind.is_async:
            # A job that awaits nothing ends in its task's first step, which the loop runs before this
            # task resumes: its wait then builds no future, timer or callbacks (this runs for every job).
            await asyncio.sleep(0)
        # The timeout counts from when the code began (a job claimed while another held the loop began late).
        deadline = (ran[0] if ran else started) + kind.timeout
        if not await self._hold(attempt, work, until=deadline, or_cancel=True):
            if attempt.cancel_requested:
                await self._stop_cancelled(attempt, ctx, work, deadline=deadline)
            else:
                await self._overran(attempt, ctx, work)
            return
        elapsed = ran[1] - ran[0] if len(ran) == 2 else 0.0
        if elapsed > kind.timeout:
            # it returned, but only after its timeout, and nothing stopped it in time: it held the event loop
            # (a blocking call), or another job held it while this one's thread ran on
            await self._settle_failure(job, _ran_past(elapsed, kind.timeout), None)
            return
        if work.cancelled():  # the job cancelled itself (or something it awaited)
            await self._settle_failure(job, "CancelledError", None)
            return
        exc = work.exception()
        if exc is not None:
            await self._settle_exception(job, exc)
            return
        result = work.result()
        try:
            result_json = None if result is None else encode_json(result)
        except UnstorableJson as exc:
            await self._settle_failure(job, f"the result of job kind {job.kind!r} {exc}", None)
            return
        self._succeeded(job, result_json)

    def _succeeded(self, job: ClaimedJob, result_json: str | None) -> None:
        completion = Completion(job_id=job.id, token=job.token, result_json=result_json)
        self._completer.submit(Finished(completion=completion, job=job, duration=self._ran(job)))

    def _released(self, job: ClaimedJob, why: str) -> None:
        """The attempt ended without an outcome this process recorded (it runs again): a ``released``
        event, when its code had started (every ``started`` is followed by one end)."""
        if (job.id, job.token) in self._began:
            self._events.job("released", job, duration=self._ran(job), error=why)

    def _ran(self, job: ClaimedJob) -> float:
        """Seconds since this attempt's code started (0 when it never started)."""
        began = self._began.get((job.id, job.token))
        return 0.0 if began is None else time.monotonic() - began

    async def _settle_exception(self, job: ClaimedJob, exc: BaseException) -> None:
        """The attempt's code raised ``exc``: what the job asked for (Discard, Retry), or a failed attempt."""
        if isinstance(exc, Discard):
            await self._discard(job, exc.reason)
        elif isinstance(exc, Retry):
            await self._retry_later(job, exc.after)
        else:
            await self._settle_failure(job, *_describe_error(exc))

    async def _discard(self, job: ClaimedJob, reason: object) -> None:
        await self._settle_failure(job, f"Discard: {reason}", None, final=True)

    async def _retry_later(self, job: ClaimedJob, after: float) -> None:
        """The job raised ``Retry(after=...)``: back to waiting for ``after`` seconds with its attempt
        refunded, unless it already asked ``max_retries_requested`` times (then it fails for good)."""
        limit = self._config.max_retries_requested
        if job.retries >= limit:
            await self._settle_failure(
                job,
                f"Retry: the job asked to run later {job.retries + 1} times (max_retries_requested={limit})",
                None,
                final=True,
            )
            return
        await self._store.snooze(job.id, job.token, seconds=after, retried=True)
        duration = self._ran(job)
        log.info(
            "job %s (%s) attempt %d/%d asked to run again in %gs (retry %d of at most %d); its attempt is refunded",
            job.id,
            job.kind,
            job.attempt,
            job.max_attempts,
            after,
            job.retries + 1,
            limit,
            extra=log_fields(job, duration),
        )
        self._events.job("retried", job, duration=duration, retry_in=after)
        self._wake_later(job.queue, after)

    async def _overran(self, attempt: _Attempt, ctx: JobContext, work: asyncio.Future[Any]) -> None:
        """The attempt passed its timeout: stop it, record it failed, keep its slot until its code ends."""
        job, kind = attempt.job, attempt.kind
        ctx.request_stop()
        if kind.is_async:
            work.cancel()
            ended = await self._hold(attempt, work, until=time.monotonic() + CANCEL_ESCALATION)
            if not ended:
                log.error(
                    "job %s (%s) attempt %d is stuck: still running %gs after it was cancelled at its timeout "
                    "of %gs; its slot and key stay taken until it ends",
                    job.id,
                    job.kind,
                    job.attempt,
                    CANCEL_ESCALATION,
                    kind.timeout,
                )
                self._stuck.add((job.id, job.token))
            error = f"TimeoutError: job exceeded its timeout of {kind.timeout:g}s"
            if not ended:
                error += f" and was still running {CANCEL_ESCALATION:g}s after its cancellation"
        else:
            # Python cannot kill a thread: record the timeout now, keep the slot until it returns
            error = f"TimeoutError: sync job exceeded its timeout of {kind.timeout:g}s"
            self._stuck.add((job.id, job.token))
        await self._settle_failure(job, error, None)
        await self._hold(attempt, work, until=math.inf)

    async def _stop_cancelled(
        self, attempt: _Attempt, ctx: JobContext, work: asyncio.Future[Any], *, deadline: float
    ) -> None:
        """The attempt's job was cancelled: ask its code to stop (an async job's task is cancelled) and keep
        its slot until it has; code still running at its timeout is cancelled again and reported stuck."""
        job, kind = attempt.job, attempt.kind
        ctx.request_stop()
        if kind.is_async:
            work.cancel()
        if not await self._hold(attempt, work, until=max(deadline, time.monotonic() + CANCEL_ESCALATION)):
            log.error(
                "job %s (%s) attempt %d was cancelled and still runs at its timeout of %gs; its slot and key "
                "stay taken until it ends",
                job.id,
                job.kind,
                job.attempt,
                kind.timeout,
            )
            if kind.is_async:
                work.cancel()
            self._stuck.add((job.id, job.token))
            await self._hold(attempt, work, until=math.inf)
        self._record_cancelled(job, "its code has stopped")

    async def _held_cancelled(self, job: ClaimedJob) -> bool:
        """Whether the store holds ``job`` cancelled; asked only when the store refused an outcome (rare)."""
        try:
            record = await self._store.job(job.id)
        except Exception:
            return False  # the refusal is then reported as it is
        return record is not None and record.state == "cancelled"

    def _record_cancelled(self, job: ClaimedJob, how: str) -> None:
        """The store holds the job cancelled already: nothing to record but the log line and the waiters."""
        self._stats.cancelled_attempts += 1
        log.info("job %s (%s) attempt %d was cancelled: %s", job.id, job.kind, job.attempt, how)
        self._events.job("cancelled", job, duration=self._ran(job), error=how)
        self._waiters.settled(job.id)

    async def _hold(
        self, attempt: _Attempt, work: asyncio.Future[Any], *, until: float, or_cancel: bool = False
    ) -> bool:
        """Wait for the attempt's code until ``until`` (monotonic), renewing its leases meanwhile; return
        whether it ended. ``or_cancel``: stop waiting (False) as soon as the attempt's job is cancelled."""
        renew_every = attempt.kind.lease_seconds / 3
        loop = asyncio.get_running_loop()
        while True:
            if work.done():
                return True
            if or_cancel and attempt.cancel_requested:
                return False
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            waiting: asyncio.Future[None] = loop.create_future()
            wake = functools.partial(_wake, waiting)
            work.add_done_callback(wake)
            timer = loop.call_later(min(remaining, renew_every), wake)
            if or_cancel:
                attempt.waiting = waiting
            try:
                await waiting
            finally:
                timer.cancel()
                work.remove_done_callback(wake)
                attempt.waiting = None
            if work.done():
                return True
            if or_cancel and attempt.cancel_requested:
                return False
            await self._renew(attempt.lease)

    def _log_failure(self, job: ClaimedJob, error: str, trace: str | None, *, final: bool) -> None:
        """A failed attempt: at WARNING when the job will retry, at ERROR with its traceback when it is final."""
        # As the store keeps it: a NUL or a lone surrogate in a log line breaks the log's readers.
        text = storable_text(error, limit=MAX_ERROR_CHARS)
        fields = log_fields(job, self._ran(job))
        if not final:
            log.warning(
                "job %s (%s) attempt %d/%d failed, will retry: %s",
                *(job.id, job.kind, job.attempt, job.max_attempts, text),
                extra=fields,
            )
            return
        log.error(
            "job %s (%s) attempt %d/%d failed for good: %s%s",
            *(job.id, job.kind, job.attempt, job.max_attempts, text),
            "" if trace is None else "\n" + trace.rstrip(),
            extra=fields,
        )

    async def _settle_failure(
        self, job: ClaimedJob, error: str, trace: str | None, *, crashed: bool = False, final: bool = False
    ) -> None:
        """Record a failed attempt: retrying after :func:`retry_delay`, or failed for good when it was the
        last (or ``final``); ``crashed``: it crashed its worker process (the job's crash count grows)."""
        final = final or job.attempt >= job.max_attempts
        retry_at = (
            None
            if final
            else time.time() + retry_delay(job.attempt, base=self._config.retry_base, cap=self._config.retry_cap)
        )
        # The failure is recorded whatever its text holds: what a store's text column refuses is escaped.
        stored_error = storable_text(error, limit=MAX_ERROR_CHARS)
        trace = None if trace is None else storable_text(trace, limit=MAX_TRACEBACK_CHARS)
        try:
            recorded = await self._store.fail(
                job.id, job.token, error=stored_error, traceback=trace, retry_at=retry_at, crashed=crashed
            )
        except BaseException:
            self._stats.failed_attempts += 1
            self._log_failure(job, error, trace, final=final)  # what happened, though the store could not hear it
            raise
        if not recorded and await self._held_cancelled(job):  # cancelled while its outcome was on its way
            self._record_cancelled(job, f"its outcome ({error}) came after the cancel and is not recorded")
            return
        self._stats.failed_attempts += 1
        if not recorded:
            # What the store holds stands (a rescue, another claim's outcome): claiming this outcome
            # in the log would contradict it.
            log.warning(
                "job %s (%s) attempt %d/%d: the store refused its outcome (%s), as the attempt no longer "
                "holds the job (its lease expired and it was rescued, or another attempt settled it)",
                job.id,
                job.kind,
                job.attempt,
                job.max_attempts,
                error,
            )
            self._waiters.settled(job.id)  # whoever waits reads back what the store holds
            self._released(job, f"the store refused its outcome: {stored_error}")
            return
        self._log_failure(job, error, trace, final=final)
        self._events.job(
            "failed" if final else "retried",
            job,
            duration=self._ran(job),
            error=stored_error,
            retry_in=None if retry_at is None else retry_at - time.time(),
        )
        if retry_at is not None:
            self._wake_later(job.queue, retry_at - time.time())
        if final:
            self._waiters.settled(job.id)


def _ended_itself(timeout: float, pid: int) -> str:
    """The error of an attempt whose child ended itself past its timeout (:data:`EXIT_PAST_DEADLINE`)."""
    return (
        f"TimeoutError: job exceeded its timeout of {timeout:g}s; its worker process {pid} ended itself "
        f"{CHILD_OWN_DEADLINE_MARGIN:g}s past it (job code held this process's event loop, so it could not "
        "be killed in time)"
    )


def _ran_past(ran: float, timeout: float, where: str = "") -> str:
    """The error of an attempt whose code returned only after its timeout, because nothing could stop it in time."""
    return f"TimeoutError: job ran {ran:.1f}s{where}, past its timeout of {timeout:g}s"
