"""A runtime for the multi-process PostgreSQL tests: no-op jobs logged once per run, keyed jobs that
log their start and end times, and jobs that take a while (for draining on SIGTERM)."""

from __future__ import annotations

import asyncio
import os
import time

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

work = Queue("work", max_workers=8, timeout=5, poll=0.1)
keyed = Queue("keyed", max_workers=4, timeout=5, per_key=1, poll=0.1)
slow = Queue("slow", max_workers=4, timeout=30, poll=0.1)


def _log(line: str) -> None:
    with open(LOG, "a") as log:  # O_APPEND: one short whole line per write, from any process
        log.write(line + "\n")


@work.job("noop")
async def noop(ctx: JobContext, n: int) -> None:
    _log(f"{n}")


@keyed.job("keyed.step")
async def keyed_step(ctx: JobContext, n: int) -> None:
    started = time.time()
    await asyncio.sleep(0.02)
    _log(f"{ctx.key} {started:.6f} {time.time():.6f} {n}")


@slow.job("slow.step")
async def slow_step(ctx: JobContext, n: int, seconds: float) -> None:
    _log(f"start {n}")
    await asyncio.sleep(seconds)
    _log(f"end {n}")


runtime = Runtime(
    queues=[work, keyed, slow],
    store=STORE,
    rescue_interval=0.2,
    retry_base=0.05,
    key_busy_snooze=0.05,
    grace=float(os.environ.get("CORRAL_TEST_GRACE", "20")),
    relay=0,
)
