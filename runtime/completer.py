"""The completer: records successful jobs in batches, one store transaction per batch.

Owns the queue of completions between the executor (which submits each job's result) and the
store, and resolves the waiters of the jobs once their completion is stored.
Failures are not its business: the executor records those itself, one by one.
"""

from __future__ import annotations

import asyncio
import logging

from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import Completion, Store
from corral.runtime.waiters import Waiters

__all__ = ["Completer"]

log = logging.getLogger("corral.runtime")


class Completer:
    """Batches completions: every completion waiting when the store is free goes in one transaction."""

    def __init__(self, *, store: Store, stats: RuntimeStats, waiters: Waiters) -> None:
        self._store = store
        self._stats = stats
        self._waiters = waiters
        self._inbox: asyncio.Queue[Completion | None] = asyncio.Queue()

    def submit(self, completion: Completion) -> None:
        """Queue a finished job's result for the next batch."""
        self._inbox.put_nowait(completion)

    def finish(self) -> None:
        """No more completions will come: :meth:`run` records what is queued, then returns."""
        self._inbox.put_nowait(None)

    async def run(self) -> None:
        """Store batches until :meth:`finish`; a batch the store refuses is logged and left to the rescuer."""
        closing = False
        while not closing:
            first = await self._inbox.get()
            batch: list[Completion] = []
            if first is None:
                closing = True
            else:
                batch.append(first)
            while not self._inbox.empty():
                item = self._inbox.get_nowait()
                if item is None:
                    closing = True
                else:
                    batch.append(item)
            if not batch:
                continue
            try:
                await self._store.complete(batch)
            except Exception:
                log.exception(
                    "recording %d completion(s) failed; their leases will expire and they will rerun", len(batch)
                )
                continue
            self._stats.completed += len(batch)
            for done in batch:
                self._waiters.settled(done.job_id)
