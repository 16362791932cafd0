"""The pruner: deletes done jobs once they are older than ``keep_done``, on its own schedule.

Owns the prune pass and the loop every process runs, every ``prune_interval`` seconds (the first
pass at start). It does not share the rescuer's loop: how often expired leases are looked for says
nothing about how often old jobs should go, and a slow prune must not delay a rescue.
"""

from __future__ import annotations

import logging

from corral.runtime.config import RuntimeConfig
from corral.runtime.lifecycle import Lifecycle
from corral.runtime.stores.protocol import Store

__all__ = ["Pruner"]

log = logging.getLogger("corral.runtime")


class Pruner:
    """Deletes done jobs finished more than ``config.keep_done`` seconds ago, every ``config.prune_interval``."""

    def __init__(self, *, store: Store, config: RuntimeConfig, lifecycle: Lifecycle) -> None:
        self._store = store
        self._config = config
        self._lifecycle = lifecycle

    async def run_once(self) -> int:
        """One pass; return how many jobs were deleted. Store errors propagate to the caller's loop."""
        return await self._store.prune_done(older_than=self._config.keep_done)

    async def run(self) -> None:
        """The loop: a pass at once, then one every ``prune_interval``; a failed pass is logged and retried then."""
        while self._lifecycle.plumbing:
            try:
                pruned = await self.run_once()
            except Exception:
                log.exception("prune pass failed")
            else:
                if pruned:
                    log.info("pruned %d done job(s) older than %gs", pruned, self._config.keep_done)
            await self._lifecycle.pause_plumbing(self._config.prune_interval)
