"""A runtime for subprocess tests: short timeouts and leases so crash rescue happens within seconds."""

from __future__ import annotations

import asyncio
import os
import random

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

work = Queue("work", max_workers=4, timeout=1.0, poll=0.05)
hang = Queue("hang", max_workers=2, timeout=60, poll=0.05)


@work.job("crash.step", max_attempts=1000)
async def step(ctx: JobContext, n: int) -> int:
    await asyncio.sleep(random.uniform(0.0, 0.15))
    with open(LOG, "a") as log:  # O_APPEND: one short line per completion, from any process
        log.write(f"{n} {os.getpid()}\n")
    return n


@hang.job("hang.forever")
async def hang_forever(ctx: JobContext) -> None:
    with open(LOG, "a") as log:
        log.write(f"started {ctx.job_id}\n")
    await asyncio.sleep(3600)


runtime = Runtime(
    queues=[work, hang],
    store=STORE,
    rescue_interval=0.2,
    retry_base=0.05,
    grace=float(os.environ.get("CORRAL_TEST_GRACE", "0.5")),
    relay=0,
)
