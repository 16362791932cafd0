"""The pruner: deletes done jobs once they are older than ``keep_done``.

Owns one pass only; when it runs is the rescuer's business (every few of its passes).
"""

from __future__ import annotations

from corral.runtime.config import RuntimeConfig
from corral.runtime.stores.protocol import Store

__all__ = ["Pruner"]


class Pruner:
    """Deletes done jobs finished more than ``config.keep_done`` seconds ago."""

    def __init__(self, *, store: Store, config: RuntimeConfig) -> None:
        self._store = store
        self._config = config

    async def run_once(self) -> int:
        """One pass; return how many jobs were deleted. Store errors propagate to the caller's loop."""
        return await self._store.prune_done(older_than=self._config.keep_done)
