"""A runtime for the loop-held tests: an async job that blocks its worker's event loop past its timeout.

Its key allows one attempt at a time (``per_key=1``), and its lease (timeout + 1 s) expires while
the loop is held unless something renews it off the loop; a short ``rescue_interval`` makes every
process (a producer's too) look for expired leases often.
"""

from __future__ import annotations

import os
import time

from corral.runtime import JobContext, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]
LOG = os.environ.get("CORRAL_TEST_LOG", os.devnull)

keyed = Queue("keyed", max_workers=2, timeout=1, per_key=1, poll=0.05)


@keyed.job("block.loop", max_attempts=1)
async def block_loop(ctx: JobContext, seconds: float) -> str:
    with open(LOG, "a") as log:  # O_APPEND: one short line per event, from any process
        log.write(f"start {ctx.job_id} {time.time():.3f} {os.getpid()}\n")
    time.sleep(seconds)  # the misbehaviour under test: a blocking call in async code
    with open(LOG, "a") as log:
        log.write(f"end {ctx.job_id} {time.time():.3f} {os.getpid()}\n")
    return "blocked"


runtime = Runtime(queues=[keyed], store=STORE, rescue_interval=0.2, relay=0)
