"""The rescuer: running jobs whose lease expired (their worker died) become retryable again.

Owns the rescue pass and the loop every process runs (no leader: the store makes each rescue
happen once). Each pass first renews the leases of the attempts this process still runs, so it
never rescues its own live work, even when the event loop was held past their leases. Pruning old
jobs has its own loop (:mod:`corral.runtime.maintenance.pruner`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from corral.runtime.config import RuntimeConfig
from corral.runtime.events import EventHooks, RescueEvent
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import Store

__all__ = ["Rescuer"]

log = logging.getLogger("corral.runtime")


class Rescuer:
    """Rescues expired leases every ``config.rescue_interval`` seconds; ``wake_all()`` wakes every
    queue this process works, so rescued jobs run without waiting for a poll; ``renew_in_flight()``
    extends the leases of every attempt this process runs (before each pass); ``crash_kinds()`` names
    the kinds that run in their worker's own process, whose lone attempt on a lost worker counts as a
    crash of the job (a process-isolated attempt cannot take its worker down)."""

    def __init__(
        self,
        *,
        store: Store,
        config: RuntimeConfig,
        lifecycle: Lifecycle,
        stats: RuntimeStats,
        wake_all: Callable[[], None],
        renew_in_flight: Callable[[], Awaitable[None]],
        crash_kinds: Callable[[], Sequence[str]],
        events: EventHooks,
    ) -> None:
        self._events = events
        self._store = store
        self._config = config
        self._lifecycle = lifecycle
        self._stats = stats
        self._wake_all = wake_all
        self._renew_in_flight = renew_in_flight
        self._crash_kinds = crash_kinds

    async def run_once(self) -> int:
        """One rescue pass; return how many jobs were rescued. Store errors propagate to the caller."""
        await self._renew_in_flight()
        rescued = await self._store.rescue_expired(crash_kinds=self._crash_kinds())
        if rescued:
            self._stats.rescued += rescued
            log.warning("rescued %d job(s) whose lease expired", rescued)
            self._events.emit(RescueEvent(count=rescued, at=time.time()))
            self._wake_all()
        return rescued

    async def run(self) -> None:
        """Make running jobs whose lease expired retryable, every ``rescue_interval``."""
        while self._lifecycle.plumbing:
            try:
                await self.run_once()
            except Exception:
                log.exception("rescuer pass failed")
            await self._lifecycle.pause_plumbing(self._config.rescue_interval)
