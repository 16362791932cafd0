"""The periodic scheduler: enqueues each periodic job kind once per period across every process.

Owns the specs derived from the kinds declared with ``queue.periodic(...)`` and the loop that
offers them to the store (which decides, under its write lock, which are due).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import JobKind
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stores.protocol import PeriodicSpec, Store

__all__ = ["PeriodicScheduler", "periodic_specs"]

log = logging.getLogger("corral.runtime")


def periodic_specs(kinds: Iterable[JobKind]) -> list[PeriodicSpec]:
    """The periodic kinds among ``kinds``, as the store schedules them."""
    return [
        PeriodicSpec(
            kind=k.name,
            queue=k.queue,
            every=k.every,
            max_attempts=k.max_attempts,
            lease_seconds=k.lease_seconds,
            run_on_start=k.run_on_start,
        )
        for k in kinds
        if k.every is not None
    ]


class PeriodicScheduler:
    """Offers the periodic specs to the store every tick (half the shortest period, at most 1 s);
    ``wake(queue)`` wakes the claim loop of a queue that got a new job."""

    def __init__(
        self, *, store: Store, config: RuntimeConfig, lifecycle: Lifecycle, wake: Callable[[str], None]
    ) -> None:
        self._store = store
        self.specs = periodic_specs(config.kinds.values())
        self._lifecycle = lifecycle
        self._wake = wake

    async def run_once(self) -> list[int]:
        """One pass: enqueue the due periodic jobs; return their ids. Store errors propagate to the caller."""
        job_ids = await self._store.schedule_periodic(self.specs)
        if job_ids:
            for spec in self.specs:
                self._wake(spec.queue)
        return job_ids

    async def run(self) -> None:
        """The loop; the runtime starts it only when there are specs."""
        tick = min(1.0, min(spec.every for spec in self.specs) / 2)
        while self._lifecycle.plumbing:
            try:
                await self.run_once()
            except Exception:
                log.exception("periodic scheduling failed")
            await asyncio.sleep(tick)
