"""The relay: moves outbox events into jobs, one job per kind subscribed to the event's topic.

Owns the routes (topic -> the kinds that subscribe to it, derived from ``queue.job(..., on=...)``)
and the relay loop; the runtime runs ``relay`` such loops per process (no leader: the store moves
each event exactly once). The relay is the first service ``stop()`` ends, so no new jobs appear
while the queues drain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from corral.runtime.config import RuntimeConfig
from corral.runtime.declarations import JobKind, KindTable
from corral.runtime.infra import wait_event
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import Route, Store

__all__ = ["Relay", "event_routes"]

log = logging.getLogger("corral.runtime")


def event_routes(kinds: Iterable[JobKind]) -> dict[str, list[Route]]:
    """Topic -> where the relay sends its events, for the kinds subscribed with ``on=...``."""
    routes: dict[str, list[Route]] = {}
    for kind in kinds:
        for topic in kind.on:
            routes.setdefault(topic, []).append(
                Route(
                    kind=kind.name, queue=kind.queue, max_attempts=kind.max_attempts, lease_seconds=kind.lease_seconds
                )
            )
    return routes


class Relay:
    """Moves at most ``config.relay_batch`` outbox rows per pass; ``wake(queue)`` wakes the claim loop
    of every routed queue after a pass that moved events. :meth:`poke` starts the next pass at once."""

    def __init__(
        self,
        *,
        store: Store,
        config: RuntimeConfig,
        lifecycle: Lifecycle,
        stats: RuntimeStats,
        wake: Callable[[str], None],
    ) -> None:
        self._store = store
        self._config = config
        self._lifecycle = lifecycle
        self._stats = stats
        self._wake_queue = wake
        self._kinds = KindTable(config.queues)
        self._routes: dict[str, list[Route]] = {}
        self._routed_queues: set[str] = set()
        self._routes_at = -1
        self._wake = asyncio.Event()

    @property
    def routes(self) -> dict[str, list[Route]]:
        """Topic -> its routes, for the kinds declared on the queues so far (also after the runtime was built)."""
        generation = self._kinds.generation
        if generation != self._routes_at:
            self._routes = event_routes(self._kinds.values())
            self._routed_queues = {route.queue for routes in self._routes.values() for route in routes}
            self._routes_at = generation
        return self._routes

    def poke(self) -> None:
        """An event was published (here, or pushed by the store): relay now instead of at the next interval."""
        self._wake.set()

    async def run_once(self) -> int:
        """One pass; return how many events it moved. Store errors propagate to the caller."""
        moved = await self._store.relay(self.routes, limit=self._config.relay_batch)
        if moved.events:
            self._stats.relay_passes.append(moved.events)
            for queue in self._routed_queues:
                self._wake_queue(queue)
        return moved.events

    async def run(self) -> None:
        """The relay loop: passes back to back while full batches come, else every ``relay_interval``."""
        while self._lifecycle.relaying:
            self._wake.clear()
            try:
                moved = await self.run_once()
            except Exception:
                log.exception("relay pass failed")
                moved = 0
            if moved >= self._config.relay_batch:
                await asyncio.sleep(0)  # more rows wait: next pass at once, but let others run
                continue
            await wait_event(self._wake, self._config.relay_interval)
