"""The producers: one claim loop per queue this process works, and how the other services wake them.

Owns each queue's worker limit (never more attempts in flight than ``max_workers``), its
adaptive polling, and the tasks it starts (one per claimed attempt, run by the
:class:`~corral.runtime.executor.JobExecutor`). A slot belongs to an attempt (the job's id and claim
token), never to a job id: a retry of a job whose earlier attempt still runs here takes a slot of
its own, and the earlier attempt's slot is freed only when its task has really ended.
:class:`Producers` is the set of them by queue name: the one thing the relay, the rescuer, the
periodic scheduler, the executor and ``enqueue`` know about the claim loops is that they can wake one.
A plain queue's claim (not per_key) carries the completions the completer holds: one statement records the
jobs that just finished and claims the next ones.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time

from corral.runtime.completer import Completer
from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import Queue
from corral.runtime.executor import JobExecutor
from corral.runtime.infra import wait_event
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stores.protocol import ClaimedJob, Store

__all__ = ["Producer", "Producers"]

log = logging.getLogger("corral.runtime")

# Seconds a claim waits after the start of the previous one when that one emptied the queue: jobs arriving
# one by one (faster than a claim's round trip) are then claimed a few at a time, not one claim each.
# A job arriving after a quiet spell is claimed at once.
CLAIM_COALESCE = 0.003


class Producer:
    """The claim loop of one queue: claims up to its free slots and starts one task per claimed job.

    Adaptive polling, for jobs enqueued by other processes: right after finding work the next look
    comes after ``config.hot_poll``, then the interval doubles up to ``queue.poll`` when idle. When the
    store pushes notices of new jobs (``pushed``), polling is only the fallback: every ``queue.poll``;
    a freed slot then claims only while there may be more work than the last claim took (it filled
    every free slot or failed, or the queue is per_key), since every new runnable job comes with a
    notice (one arriving while every slot is busy finds the last claim full, so the next freed slot
    claims). A claim right after one that emptied the queue waits until ``CLAIM_COALESCE`` after that
    one began, so jobs arriving faster than claims share one.
    """

    def __init__(
        self,
        *,
        queue: Queue,
        store: Store,
        executor: JobExecutor,
        completer: Completer,
        config: RuntimeConfig,
        lifecycle: Lifecycle,
        worker_id: str,
        pushed: bool,
    ) -> None:
        self.queue = queue
        self._store = store
        self._executor = executor
        self._completer = completer
        self._carries = queue.per_key is None  # a per_key claim is its own statement: it carries nothing
        self._lifecycle = lifecycle
        self._worker_id = worker_id
        self._hot_poll = queue.poll if pushed else config.hot_poll
        self._pushed = pushed
        self._wake = asyncio.Event()
        self._backlog = True  # the last claim may have left runnable jobs behind
        self._last_claim = -math.inf  # when the last claim began (monotonic)
        self._running: dict[tuple[int, int], asyncio.Task[None]] = {}  # (job id, claim token) -> task
        self._past_filled_keys = _LookPastFilledKeys(first_wait=config.hot_poll, longest_wait=queue.poll)

    def wake(self) -> None:
        """Look for jobs now (new local jobs, a notice, a freed key slot, a due retry, the stop)."""
        self._wake.set()

    def running_jobs(self) -> list[asyncio.Task[None]]:
        """The tasks of the attempts this queue runs now (each one a slot taken)."""
        return list(self._running.values())

    async def run(self) -> None:
        """The claim loop; it ends once the runtime stops claiming (or is cancelled)."""
        if self._carries:
            self._completer.carriers += 1
        try:
            await self._claim_loop()
        finally:
            if self._carries:
                self._completer.carriers -= 1

    async def _claim_loop(self) -> None:
        queue = self.queue
        idle_wait = queue.poll
        while self._lifecycle.claiming:
            self._wake.clear()  # before claiming, so a wake during the claim is not lost
            free = queue.max_workers - len(self._running)
            claimed: list[ClaimedJob] = []
            if free > 0:
                await self._coalesce()
                if not self._lifecycle.claiming:
                    break
                self._wake.clear()  # news during the wait is claimed by this claim
                free = queue.max_workers - len(self._running)
                self._last_claim = time.monotonic()
                try:
                    # per_key: the store skips jobs whose key has no free slot and leases the others'
                    # slots with the claim, so a hot key's backlog is never claimed only to be snoozed.
                    claimed = await self._claim(free)
                    self._backlog = len(claimed) >= free or queue.per_key is not None
                except Exception:
                    self._backlog = True
                    log.exception("queue %s: claim failed; retrying after the poll interval", queue.name)
                for job in claimed:
                    task = self._executor.start(queue, job, claimed_at=self._last_claim)
                    self._running[job.id, job.token] = task
                    task.add_done_callback(functools.partial(self._attempt_done, (job.id, job.token)))
                if queue.per_key is not None:
                    self._past_filled_keys.claimed(bool(claimed))
                if claimed:
                    idle_wait = self._hot_poll
                    if len(claimed) == free or (queue.per_key is not None and self._past_filled_keys.due()):
                        continue  # there may be more; the next pass waits only if every slot is busy
            if not self._lifecycle.claiming:
                break
            wait = queue.poll if free <= 0 else min(idle_wait, queue.poll)
            if not await wait_event(self._wake, wait) and free > 0:
                idle_wait = min(idle_wait * 2, queue.poll)

    async def _claim(self, free: int) -> list[ClaimedJob]:
        """Claim up to ``free`` jobs, carrying the completions waiting; a claim carrying them that fails
        leaves them to the completer (recorded alone, row by row if the store refuses one) and claims
        again alone."""
        queue = self.queue
        riding = self._completer.board() if self._carries else []
        if riding:
            try:
                claimed = await self._store.claim(
                    queue.name, free, self._worker_id, completions=[finished.completion for finished in riding]
                )
            except Exception as exc:
                self._completer.left_behind(riding)
                log.debug("queue %s: a claim carrying %d completion(s) failed (%s)", queue.name, len(riding), exc)
            except BaseException:  # cancelled in flight: maybe recorded, maybe not; recording again is harmless
                self._completer.left_behind(riding)
                raise
            else:
                self._completer.carried(riding)
                return claimed
        return await self._store.claim(queue.name, free, self._worker_id, per_key=queue.per_key)

    async def _coalesce(self) -> None:
        """Wait out ``CLAIM_COALESCE`` after the last claim when it emptied the queue (not on per_key queues,
        whose claims are paced by :class:`_LookPastFilledKeys`)."""
        if self._backlog or self.queue.per_key is not None:
            return
        remaining = self._last_claim + CLAIM_COALESCE - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)

    def _attempt_done(self, attempt: tuple[int, int], _task: asyncio.Task[None]) -> None:
        del self._running[attempt]
        if self._backlog or not self._pushed:
            self._wake.set()  # a slot is free, and there may be a job for it


class _LookPastFilledKeys:
    """When a per_key queue's claim loop claims again at once though its claim left slots free.

    A per_key claim looks at only a few jobs past the first, so a hot key's backlog can hide other
    keys' jobs behind its own; a claim right after, with that key now full, passes over it. While such
    looks find something they go on at once; each that finds nothing doubles the wait before the
    next (from ``first_wait`` up to ``longest_wait``, the queue's poll), so a hot key alone costs no
    empty claim per job and a job hidden behind it waits at most about one poll.
    """

    def __init__(self, *, first_wait: float, longest_wait: float) -> None:
        self._first_wait = first_wait
        self._longest_wait = longest_wait
        self._wait = 0.0
        self._next_at = 0.0
        self._looking = False

    def due(self) -> bool:
        """True when the claim loop should claim again now; it then reports the outcome to :meth:`claimed`."""
        self._looking = time.monotonic() >= self._next_at
        return self._looking

    def claimed(self, found: bool) -> None:
        if not self._looking:
            return
        self._looking = False
        self._wait = 0.0 if found else min(max(self._wait * 2, self._first_wait), self._longest_wait)
        self._next_at = time.monotonic() + self._wait


class Producers:
    """The producers of this process by queue name; waking a queue this process does not work is a no-op."""

    def __init__(self) -> None:
        self._by_queue: dict[str, Producer] = {}

    def add(self, producer: Producer) -> None:
        self._by_queue[producer.queue.name] = producer

    def wake(self, queue: str) -> None:
        producer = self._by_queue.get(queue)
        if producer is not None:
            producer.wake()

    def wake_all(self) -> None:
        for producer in self._by_queue.values():
            producer.wake()

    def wake_later(self, queue: str, seconds: float) -> None:
        # Retries and snoozes of this process's own jobs should not wait for the next poll.
        if queue in self._by_queue:
            asyncio.get_running_loop().call_later(max(seconds, 0.0) + 0.001, self.wake, queue)

    def running_jobs(self) -> list[asyncio.Task[None]]:
        """The tasks of every job this process runs now, over all its queues."""
        return [task for producer in self._by_queue.values() for task in producer.running_jobs()]
