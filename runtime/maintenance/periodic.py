"""The periodic scheduler: enqueues each periodic job kind once per period across every process.

Owns the specs derived from the kinds declared with ``queue.periodic(...)`` and the loop that
offers them to the store (which decides, under its write lock, which are due).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import JobKind, KindTable
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
    ``wake(queue)`` wakes the claim loop of a queue that got a new job. The specs are those of the
    periodic kinds declared on the queues so far, also after the runtime was built."""

    def __init__(
        self, *, store: Store, config: RuntimeConfig, lifecycle: Lifecycle, wake: Callable[[str], None]
    ) -> None:
        self._store = store
        self._kinds = KindTable(config.queues)
        self._specs: list[PeriodicSpec] = []
        self._specs_at = -1
        self._lifecycle = lifecycle
        self._wake = wake

    @property
    def specs(self) -> list[PeriodicSpec]:
        generation = self._kinds.generation
        if generation != self._specs_at:
            self._specs, self._specs_at = periodic_specs(self._kinds.values()), generation
        return self._specs

    async def run_once(self) -> list[int]:
        """One pass: enqueue the due periodic jobs; return their ids. Store errors propagate to the caller."""
        specs = self.specs
        job_ids = await self._store.schedule_periodic(specs) if specs else []
        if job_ids:
            for spec in specs:
                self._wake(spec.queue)
        return job_ids

    async def run(self) -> None:
        """The loop; with no periodic kind yet it only looks every second whether one was declared."""
        while self._lifecycle.plumbing:
            try:
                await self.run_once()
            except Exception:
                log.exception("periodic scheduling failed")
            await asyncio.sleep(min([1.0, *(spec.every / 2 for spec in self.specs)]))
