"""The canceller: this process's attempts of jobs cancelled in the store (by any process) are stopped.

Owns the loop that, while this process runs attempts, reads their jobs' states every
:data:`CANCEL_POLL` seconds (and at once when poked: a store's finished-job notice, PostgreSQL's NOTIFY,
may name a job running here) and hands the cancelled ones to the executor. Cancelling itself is one
store call (:meth:`Runtime.cancel <corral.runtime.Runtime.cancel>`); a job cancelled by this process is
handed over at once, without waiting for this loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence

from corral.runtime.infra import wait_event
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stores.protocol import CANCELLED, Store

__all__ = ["CANCEL_POLL", "Canceller"]

log = logging.getLogger("corral.runtime")

# Seconds between two reads of the running jobs' states: how late a job cancelled by another process
# is noticed at worst where the store pushes no notices (SQLite, memory, poll_only PostgreSQL).
CANCEL_POLL = 0.5


class Canceller:
    """``running_job_ids()`` names the jobs this process runs; ``runs_any(ids)`` says whether one of ``ids``
    may (a cheap look, without building that list); ``cancel(ids)`` stops their attempts."""

    def __init__(
        self,
        *,
        store: Store,
        lifecycle: Lifecycle,
        running_job_ids: Callable[[], Sequence[int]],
        runs_any: Callable[[Sequence[int]], bool],
        cancel: Callable[[Collection[int]], int],
    ) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._running_job_ids = running_job_ids
        self._runs_any = runs_any
        self._cancel = cancel
        self._poke = asyncio.Event()

    def on_finished(self, job_ids: Sequence[int]) -> None:
        """The store says ``job_ids`` finished elsewhere: look now if one of them runs here. Every completion
        batch of every process sends one such notice, this process's own too: the look is one set test."""
        if self._runs_any(job_ids):
            self._poke.set()

    async def run_once(self) -> int:
        """One look; return how many attempts were told to stop. Store errors propagate to the caller."""
        job_ids = self._running_job_ids()
        if not job_ids:
            return 0
        states = await self._store.job_states(job_ids)
        cancelled = {job_id for job_id, state in states.items() if state.state == CANCELLED}
        return self._cancel(cancelled) if cancelled else 0

    async def run(self) -> None:
        while self._lifecycle.plumbing:
            self._poke.clear()
            try:
                await self.run_once()
            except Exception:
                log.exception("canceller: reading the running jobs' states failed")
            await wait_event(self._poke, CANCEL_POLL)
