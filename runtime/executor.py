"""The job executor: runs one claimed job from its key lease to its settlement.

Owns what happens to a job between its claim and its record: taking and releasing the per-key
lease (snoozing the job when the key is busy), calling the job's function under its hard timeout
(async: cancelled; sync: its own thread, whose slot stays taken until it returns), turning every
exception into a failed attempt with a retry time (:func:`retry_delay`), handing results to the
completer, and releasing a job the hard stop interrupted. Claiming is the producer's business.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from corral.runtime.completer import Completer
from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import JobContext, JobKind, KindTable, Queue
from corral.runtime.infra import run_in_thread
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.payloads import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, UnstorableJson, encode_json, storable_text
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import FAILED, ClaimedJob, Completion, Store
from corral.runtime.waiters import Waiters

if TYPE_CHECKING:
    from corral.runtime.runtime import Runtime

__all__ = ["JobExecutor", "retry_delay"]

log = logging.getLogger("corral.runtime")


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
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ raises still fails its job, with its type
        message = "<str() of the exception failed>"
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


class JobExecutor:
    """Runs claimed jobs of this runtime's kinds; one :meth:`execute` call per claimed job.

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
    ) -> None:
        self._runtime = runtime
        self._store = store
        self._config = config
        self._kinds: Mapping[str, JobKind] = KindTable(config.queues)  # kinds declared after the runtime too
        self._lifecycle = lifecycle
        self._stats = stats
        self._completer = completer
        self._waiters = waiters
        self._wake_later = wake_later

    async def execute(self, queue: Queue, job: ClaimedJob) -> None:
        """Run ``job`` (claimed from ``queue``) and settle it; never raises but for the hard stop."""
        kind = self._kinds.get(job.kind)
        if kind is None:
            await self._settle_failure(job, f"job kind {job.kind!r} is not declared in this process", None)
            return
        leased_key: str | None = None
        try:
            if queue.per_key is not None and job.key is not None:
                acquired = await self._store.acquire_key_lease(
                    queue.name, job.key, holder=job.id, limit=queue.per_key, seconds=kind.lease_seconds
                )
                if not acquired:
                    snooze = self._config.key_busy_snooze
                    await self._store.snooze(job.id, job.token, seconds=snooze)
                    self._stats.snoozed += 1
                    self._wake_later(queue.name, snooze)
                    return
                leased_key = job.key
            await self._run(kind, job)
        except asyncio.CancelledError:
            if not self._lifecycle.hard_stopping:
                raise
            # interrupted by the hard stop: back to waiting, attempt refunded
            try:
                await self._store.release(job.id, job.token)
                self._stats.released += 1
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
                    await self._store.release_key_lease(queue.name, leased_key, holder=job.id)
                except (Exception, asyncio.CancelledError):
                    log.warning("job %s: key lease not released; it expires on its own", job.id)

    async def _run(self, kind: JobKind, job: ClaimedJob) -> None:
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
            if self._lifecycle.hard_stopping:
                raise
            # the job cancelled itself (or something it awaited): a failure like any other
            await self._settle_failure(job, *_describe_error(exc))
            return
        except BaseException as exc:
            await self._settle_failure(job, *_describe_error(exc))
            return
        try:
            result_json = None if result is None else encode_json(result)
        except UnstorableJson as exc:
            await self._settle_failure(job, f"the result of job kind {job.kind!r} {exc}", None)
            return
        self._completer.submit(Completion(job_id=job.id, token=job.token, result_json=result_json))

    async def _settle_failure(self, job: ClaimedJob, error: str, trace: str | None) -> None:
        """Record a failed attempt: retrying after :func:`retry_delay`, or failed for good when it was the last."""
        final = job.attempt >= job.max_attempts
        retry_at = (
            None
            if final
            else time.time() + retry_delay(job.attempt, base=self._config.retry_base, cap=self._config.retry_cap)
        )
        log.warning(
            "job %s (%s) attempt %d/%d failed%s: %s",
            job.id,
            job.kind,
            job.attempt,
            job.max_attempts,
            " for good" if final else ", will retry",
            error,
        )
        self._stats.failed_attempts += 1
        # The failure is recorded whatever its text holds: what a store's text column refuses is escaped.
        error = storable_text(error, limit=MAX_ERROR_CHARS)
        trace = None if trace is None else storable_text(trace, limit=MAX_TRACEBACK_CHARS)
        await self._store.fail(job.id, job.token, error=error, traceback=trace, retry_at=retry_at)
        if retry_at is not None:
            self._wake_later(job.queue, retry_at - time.time())
        if final:
            self._waiters.resolve(job.id, FAILED, None, error)
