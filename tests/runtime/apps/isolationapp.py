"""A runtime for subprocess tests of process isolation: sync jobs that outlive their timeout or a worker."""

from __future__ import annotations

import os
import time

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

slow = Queue("slow", max_workers=2, timeout=30, poll=0.05)
short = Queue("short", max_workers=2, timeout=2, poll=0.05)
fragile = Queue("fragile", max_workers=2, timeout=1, poll=0.05)


def _log(line: str) -> None:
    with open(LOG, "a") as log:  # O_APPEND: one short line per write, from any process
        log.write(line + "\n")


@slow.job("slow.sleep")
def sleep(ctx: JobContext, seconds: float) -> float:
    _log(f"started {ctx.job_id} {ctx.attempt} {os.getpid()}")
    time.sleep(seconds)
    return seconds


@short.job("short.first_attempt_hangs")
def first_attempt_hangs(ctx: JobContext) -> int:
    _log(f"started {ctx.job_id} {ctx.attempt} {os.getpid()}")
    time.sleep(60 if ctx.attempt == 1 else 0.05)
    return ctx.attempt


@fragile.job("fragile.exit", max_attempts=10)
async def exits_its_worker(ctx: JobContext) -> None:
    _log(f"started {ctx.job_id} {ctx.attempt} {os.getpid()}")
    os._exit(1)  # in-process: the whole worker goes down with it


def imported_job(ctx: JobContext, n: int) -> int:
    """Not a declared kind: what a spawned child imports by ``module:qualname``."""
    return n * 3


runtime = Runtime(
    queues=[slow, short, fragile],
    store=STORE,
    rescue_interval=0.2,
    retry_base=0.05,
    grace=float(os.environ.get("CORRAL_TEST_GRACE", "2")),
    relay=0,
    max_crashes=3,
)
