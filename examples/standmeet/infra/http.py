"""A stand-in HTTP client with its own timeout, shorter than the webhook job timeout (10 s < 15 s),
so a clear network error arrives before the job itself is cancelled."""

from __future__ import annotations

import asyncio
import random

HTTP_TIMEOUT = 10.0


async def post(url: str, body: dict[str, object]) -> int:
    async def send() -> int:
        await asyncio.sleep(random.uniform(0.01, 0.05))  # the network
        return 200

    return await asyncio.wait_for(send(), HTTP_TIMEOUT)
