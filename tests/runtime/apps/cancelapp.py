"""A runtime for the cross-process cancel tests: a long async job and a process-isolated sync busy loop,
each logging ``start JOB PID`` when it begins (and the async one ``cancelled JOB TIME`` when its task is
cancelled)."""

from __future__ import annotations

import asyncio
import os
import time

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

long = Queue("long", max_workers=2, timeout=60, poll=0.05)


def _log(line: str) -> None:
    with open(LOG, "a") as log:  # O_APPEND: one short whole line per write, from any process
        log.write(line + "\n")


@long.job("long.wait")
async def wait(ctx: JobContext) -> None:
    _log(f"start {ctx.job_id} {os.getpid()}")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        _log(f"cancelled {ctx.job_id} {time.time():.6f}")
        raise


@long.job("long.spin", isolation="process")
def spin(ctx: JobContext) -> None:
    _log(f"start {ctx.job_id} {os.getpid()}")
    while True:  # the misbehaviour under test: it never looks at ctx.stop_requested
        pass


runtime = Runtime(queues=[long], store=STORE, rescue_interval=0.2, relay=0)
