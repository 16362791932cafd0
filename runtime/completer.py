"""The completer: records successful jobs in batches, one store transaction per batch.

Owns the queue of completions between the executor (which submits each job's result) and the
store, resolves the waiters of the jobs once their completion is stored, and reports each stored success
(a ``succeeded`` event and an INFO line with its duration). While claim loops that carry completions run,
what waits is first offered to their next claim (:meth:`Completer.board`): the claim's statement records
it, one round trip for both; what no claim took within ``RIDE_WAIT`` is recorded alone.
A batch the store refuses is recorded again row by row, so one result the store cannot hold
fails only its own job (for good); the others are done. Failures of the jobs themselves are not
its business: the executor records those, one by one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from corral.runtime.errors import StoreUnavailable
from corral.runtime.events import EventHooks, log_fields
from corral.runtime.payloads import MAX_ERROR_CHARS, UnstorableJson, storable_text
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import ClaimedJob, Completion, Store
from corral.runtime.waiters import Waiters

__all__ = ["Completer", "Finished"]

log = logging.getLogger("corral.runtime")

# Seconds a completion waits for a claim loop's next claim to carry it before it is recorded alone: a
# worker busy with short jobs claims every few milliseconds, and a claim carrying the completions of
# the jobs before it halves the statements per job. Only while a claim loop that carries them runs.
RIDE_WAIT = 0.002


@dataclass(slots=True)
class Finished:
    """A successful attempt waiting to be recorded: its completion, its claim and how long its code ran.
    Slotted and not frozen: one is built per job, and a frozen dataclass's ``__init__`` costs 4x more."""

    completion: Completion
    job: ClaimedJob
    duration: float


class Completer:
    """Batches completions: every completion waiting when the store is free goes in one transaction."""

    def __init__(self, *, store: Store, stats: RuntimeStats, waiters: Waiters, events: EventHooks) -> None:
        self._store = store
        self._stats = stats
        self._waiters = waiters
        self._events = events
        self._hooked = bool(events)
        # A list and an event rather than an asyncio.Queue: one append per job, the whole list per batch.
        self._inbox: list[Finished] = []
        self._arrived = asyncio.Event()
        self._closing = False
        self.carriers = 0  # claim loops running now whose claims carry completions

    def board(self) -> list[Finished]:
        """Hand every completion waiting to a claim that records them in its own statement; the claim
        then reports the outcome: :meth:`carried` or :meth:`left_behind`."""
        batch, self._inbox = self._inbox, []
        return batch

    def carried(self, batch: list[Finished]) -> None:
        """A claim recorded ``batch``: its jobs are done."""
        self._stored(batch)

    def left_behind(self, batch: list[Finished]) -> None:
        """A claim that took ``batch`` failed (or may have): record it alone, as if it never left (a
        completion recorded twice changes nothing the second time)."""
        self._inbox[:0] = batch
        self._arrived.set()

    def submit(self, finished: Finished) -> None:
        """Queue a finished job's result for the next batch."""
        self._inbox.append(finished)
        self._arrived.set()

    def finish(self) -> None:
        """No more completions will come: :meth:`run` records what is queued, then returns."""
        self._closing = True
        self._arrived.set()

    async def run(self) -> None:
        """Store batches until :meth:`finish` and the inbox is empty; a completion the store cannot record
        alone (an outage) is logged and left to the rescuer."""
        while True:
            if not self._inbox:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            if self.carriers and not self._closing:
                await asyncio.sleep(RIDE_WAIT)  # a claim may carry them meanwhile
                if not self._inbox:
                    continue
            batch, self._inbox = self._inbox, []
            try:
                await self._store.complete([finished.completion for finished in batch])
                stored = batch
            except StoreUnavailable as exc:
                # An outage: row by row would only wait on the store once per row.
                log.error(
                    "recording %d completion(s) failed (%s); their leases will expire and they will rerun",
                    len(batch),
                    exc,
                )
                self._unrecorded(batch, exc)
                stored = []
            except Exception as exc:
                if len(batch) == 1:
                    await self._refused(batch[0], exc)
                    stored = []
                else:
                    # One row the store refuses must not take the batch's innocent jobs with it.
                    log.warning("recording %d completions failed (%s); recording them one by one", len(batch), exc)
                    stored = await self._complete_one_by_one(batch)
            self._stored(stored)

    def _stored(self, stored: list[Finished]) -> None:
        """The store recorded these successes: resolve their waiters and report them."""
        self._stats.completed += len(stored)
        # The success lines' fields are built only for a log that keeps them: this runs for every job.
        logged = log.isEnabledFor(logging.INFO)
        for done in stored:
            self._waiters.settled(done.job.id)
            self._report(done, logged=logged)

    def _report(self, done: Finished, *, logged: bool) -> None:
        job = done.job
        if logged:
            log.info(
                "job %s (%s) attempt %d/%d succeeded in %.1f ms",
                job.id,
                job.kind,
                job.attempt,
                job.max_attempts,
                done.duration * 1000.0,
                extra=log_fields(job, done.duration),
            )
        if self._hooked:
            self._events.job("succeeded", job, duration=done.duration)

    def _unrecorded(self, batch: list[Finished], exc: Exception) -> None:
        """Successes the store did not record: they run again, so their attempts end ``released``."""
        for finished in batch:
            why = f"recording its result failed: {exc}"
            self._events.job("released", finished.job, duration=finished.duration, error=why)

    async def _complete_one_by_one(self, batch: list[Finished]) -> list[Finished]:
        """Record each completion of a batch the store refused alone; return those stored. An outage
        on the way leaves the rest to the rescuer."""
        stored: list[Finished] = []
        for index, finished in enumerate(batch):
            try:
                await self._store.complete([finished.completion])
            except StoreUnavailable as exc:
                log.error(
                    "recording %d completion(s) failed (%s); their leases will expire and they will rerun",
                    len(batch) - index,
                    exc,
                )
                self._unrecorded(batch[index:], exc)
                break
            except Exception as exc:
                await self._refused(finished, exc)
            else:
                stored.append(finished)
        return stored

    async def _refused(self, finished: Finished, exc: Exception) -> None:
        """The store refused this completion alone: a value it cannot hold fails the job for good
        (running it again would make the same result); an outage leaves it to the rescuer."""
        completion = finished.completion
        if not isinstance(exc, UnstorableJson):
            log.error(
                "recording the completion of job %s failed (%s); its lease will expire and it will rerun",
                completion.job_id,
                exc,
            )
            self._unrecorded([finished], exc)
            return
        error = storable_text(f"the result of job {completion.job_id} {exc}", limit=MAX_ERROR_CHARS)
        log.error("job %s: %s", completion.job_id, error, extra=log_fields(finished.job, finished.duration))
        try:
            await self._store.fail(completion.job_id, completion.token, error=error, traceback=None, retry_at=None)
        except Exception as failure:
            log.exception("job %s: recording its unstorable result as a failure failed", completion.job_id)
            self._unrecorded([finished], failure)
            return
        self._waiters.settled(completion.job_id)
        self._events.job("failed", finished.job, duration=finished.duration, error=error)
