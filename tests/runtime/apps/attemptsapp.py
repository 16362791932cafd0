"""A runtime for subprocess tests of attempts: an async job that swallows its cancellation forever."""

from __future__ import annotations

import asyncio
import contextlib
import os

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

stubborn = Queue("stubborn", max_workers=2, timeout=0.5, poll=0.05)


@stubborn.job("stubborn.forever", max_attempts=3)
async def forever(ctx: JobContext) -> None:
    with open(LOG, "a") as log:
        log.write(f"started {ctx.job_id} {ctx.attempt}\n")
    while True:
        with contextlib.suppress(asyncio.CancelledError):  # the misbehaviour under test: it never ends
            await asyncio.sleep(0.05)


runtime = Runtime(queues=[stubborn], store=STORE, rescue_interval=0.2, retry_base=0.05, relay=0)
