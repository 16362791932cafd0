"""Cache warm-up at boot: process plumbing, so it is detached (owned and cancelled by the runtime)."""

from __future__ import annotations

import asyncio

from corral.runtime import detach

WARM: dict[str, bool] = {}


async def _warm_search_cache() -> None:
    await asyncio.sleep(0.01)  # stands in for loading a few hot queries
    WARM["search"] = True


def start_warmup() -> None:
    """Warm caches in the background; errors are logged by detach, shutdown cancels it."""
    detach(_warm_search_cache(), name="standmeet.warm-search-cache")
