"""The waiters: ``Runtime.wait()``, its per-queue limit, and the one shared notifier that answers it.

Owns who waits on which job, which queue recent jobs belong to, the notifier loop (one store
query per tick for every waited job, or per pushed completion notice), and resolving waiters
when a job of this process settles. A waiter is answered only from the outcome the store accepted
(a state read back from it), never from what this process tried to record: a stale attempt's
result that the store refused is never reported as done. Settling jobs is not its business: the
executor and the completer tell it through :meth:`Waiters.settled`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.runtime.config import RuntimeConfig
from corral.runtime.errors import StoreUnavailable
from corral.runtime.infra import wait_event
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stores.protocol import FINAL_STATES, Store, shown_error

__all__ = ["JobStatus", "Waiters"]

log = logging.getLogger("corral.runtime")

# wait() on a job this process enqueued needs no store read to learn its queue; older ids are
# forgotten (wait() then asks the store) so the memory stays bounded.
REMEMBERED_JOBS = 100_000


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
        return self.state in FINAL_STATES


@dataclass
class _Waiter:
    queue: str
    futures: list[asyncio.Future[JobStatus]] = field(default_factory=list)


class Waiters:
    """Everyone waiting on a job of this runtime, and the notifier loop that answers them.

    ``pushed``: the store pushes other processes' completion notices, so the notifier polls only
    as a fallback (every ``notify_fallback``) instead of every ``notify_interval``.
    """

    def __init__(self, *, store: Store, config: RuntimeConfig, lifecycle: Lifecycle, pushed: bool) -> None:
        self._store = store
        self._config = config
        self._lifecycle = lifecycle
        self._pushed = pushed
        self._waiters: dict[int, _Waiter] = {}
        self._counts: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._job_queues: OrderedDict[int, str] = OrderedDict()  # recent job id -> queue

    def remember(self, job_id: int, queue: str) -> None:
        """Note the queue of a job this process enqueued, so waiting on it costs no store read."""
        self._job_queues[job_id] = queue
        if len(self._job_queues) > REMEMBERED_JOBS:
            self._job_queues.popitem(last=False)

    async def wait(self, job_id: int, *, timeout: float) -> JobStatus:
        """Wait up to ``timeout`` seconds for a job to finish; see :meth:`Runtime.wait`."""
        queue = self._job_queues.get(job_id)
        if queue is None:
            states = await self._store.job_states([job_id])
            found = states.get(job_id)
            if found is None:
                return JobStatus(job_id=job_id, state="unknown", waited=False, error="no such job")
            queue = found.queue
            if found.state in FINAL_STATES:
                return self._status(job_id, found.state, found.result_json, found.error)
        if self._counts[queue] >= self._config.max_waiters:
            return JobStatus(job_id=job_id, state="not-waited", waited=False)
        fut: asyncio.Future[JobStatus] = asyncio.get_running_loop().create_future()
        waiter = self._waiters.setdefault(job_id, _Waiter(queue=queue))
        waiter.futures.append(fut)
        self._counts[queue] += 1
        self._wake.set()
        try:
            # asyncio.wait, not wait_for: a caller's cancellation must never turn into "pending"
            await asyncio.wait([fut], timeout=timeout)
            return fut.result() if fut.done() else JobStatus(job_id=job_id, state="pending", waited=True)
        finally:
            self._counts[queue] -= 1
            if fut in waiter.futures:
                waiter.futures.remove(fut)
            if not waiter.futures and self._waiters.get(job_id) is waiter:
                del self._waiters[job_id]

    @staticmethod
    def _status(job_id: int, state: str, result_json: str | None, error: str | None) -> JobStatus:
        result = json.loads(result_json) if result_json is not None else None
        return JobStatus(job_id=job_id, state=state, waited=True, result=result, error=shown_error(state, error))

    def settled(self, job_id: int) -> None:
        """This process recorded an outcome of ``job_id``: read what the store accepted now, if anybody waits."""
        if job_id in self._waiters:
            self._wake.set()

    def _resolve(self, job_id: int, state: str, result_json: str | None, error: str | None) -> None:
        """The store holds a final state (done, failed or cancelled) of a job: answer whoever waits on it."""
        waiter = self._waiters.get(job_id)
        if waiter is None:
            return
        status = self._status(job_id, state, result_json, error)
        for fut in waiter.futures:
            if not fut.done():
                fut.set_result(status)

    def on_finished_notice(self, job_ids: Sequence[int]) -> None:
        """The store pushed that other processes finished ``job_ids``: look now if any is waited on."""
        if any(job_id in self._waiters for job_id in job_ids):
            self._wake.set()

    def recheck(self) -> None:
        """Anything may have changed (the store reconnected): look now if anybody waits."""
        if self._waiters:
            self._wake.set()

    def answer_unknown(self) -> None:
        """The runtime stops: whoever still waits learns the state is unknown to this process."""
        for job_id, waiter in list(self._waiters.items()):
            for fut in waiter.futures:
                if not fut.done():
                    fut.set_result(JobStatus(job_id=job_id, state="unknown", waited=True))

    def _refuse(self, outage: StoreUnavailable) -> None:
        """The store could not be read: whoever waits now gets ``StoreUnavailable`` (the driver's error
        chained), not a "pending" that would claim the job is merely unfinished."""
        cause = outage.__cause__ if outage.__cause__ is not None else outage
        for job_id, waiter in list(self._waiters.items()):
            for fut in waiter.futures:
                if not fut.done():
                    refused = StoreUnavailable(f"wait() on job {job_id}: {outage}")
                    refused.__cause__ = cause
                    fut.set_exception(refused)

    async def run(self) -> None:
        """The one shared notifier: one query for every job somebody waits on, per tick (polling) or per
        completion notice that names a waited job (pushed, with a slow poll as the fallback)."""
        while self._lifecycle.plumbing:
            if not self._waiters:
                self._wake.clear()
                await self._wake.wait()
            self._wake.clear()  # before reading, so a notice arriving meanwhile is not lost
            try:
                states = await self._store.job_states(list(self._waiters))
            except StoreUnavailable as exc:
                self._refuse(exc)
                states = {}
            except Exception:
                log.exception("notifier: reading job states failed")
                states = {}
            for job_id, state in states.items():
                if state.state in FINAL_STATES:
                    self._resolve(job_id, state.state, state.result_json, state.error)
            # a local settlement wakes the notifier at once, pushed or polling
            await wait_event(self._wake, self._config.notify_fallback if self._pushed else self._config.notify_interval)
