"""A runtime for the operating tests (``corral jobs``, ``corral ui``): jobs that succeed, fail until told
otherwise, or run until stopped; its ``flag`` file decides whether ``ops.flaky`` fails."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
# While this file exists, ops.flaky fails: a test removes it to let a retried job succeed.
FAIL_FLAG = os.environ.get("CORRAL_TEST_FAIL_FLAG")

ops = Queue("ops", max_workers=2, timeout=5, poll=0.05)
slow = Queue("slow", max_workers=1, timeout=60, poll=0.05, per_key=1)


@ops.job("ops.ok")
async def ok(ctx: JobContext, n: int) -> dict[str, int]:
    return {"n": n, "double": 2 * n}


@ops.job("ops.flaky", max_attempts=2)
async def flaky(ctx: JobContext, n: int) -> int:
    if FAIL_FLAG is not None and Path(FAIL_FLAG).exists():
        raise RuntimeError(f"flaky job {n} failed on attempt {ctx.attempt}")
    return n


@slow.job("slow.sleep")
async def sleep(ctx: JobContext, seconds: float) -> None:
    await asyncio.sleep(seconds)


runtime = Runtime(
    queues=[ops, slow],
    store=STORE,
    rescue_interval=0.2,
    retry_base=0.05,
    grace=float(os.environ.get("CORRAL_TEST_GRACE", "30")),
    relay=0,
)


def settle(*, ok: int, flaky: int) -> None:
    """Enqueue ``ok`` ops.ok jobs and ``flaky`` ops.flaky ones, and work them here until each is settled."""

    async def main() -> None:
        async with runtime as rt:
            ids = [await rt.enqueue("ops.ok", n=n) for n in range(ok)]
            ids += [await rt.enqueue("ops.flaky", n=n) for n in range(flaky)]
            for job_id in ids:
                await rt.wait(job_id, timeout=10)

    asyncio.run(main())
