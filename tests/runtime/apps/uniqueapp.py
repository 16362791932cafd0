"""A runtime for the concurrent unique-enqueue tests: run as a script, it waits for a shared start time,
then enqueues one unique job per key ``0..keys-1`` (each process in its own order) and prints every
answer as JSON: ``[[key, id, duplicate], ...]``."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time

from corral.runtime import JobContext, JobRequest, Queue, Runtime

STORE = os.environ["CORRAL_TEST_STORE"]

once = Queue("once", max_workers=1, timeout=5)


@once.job("once.report", unique="by-args")
async def report(ctx: JobContext, day: int) -> None:
    return None


runtime = Runtime(queues=[once], store=STORE, relay=0)


async def main(start_at: float, keys: int, batch: bool) -> None:
    order = list(range(keys))
    random.shuffle(order)
    await runtime.start(queues=[])  # nothing is claimed: every key stays held by its waiting job
    try:
        await asyncio.sleep(max(start_at - time.time(), 0))
        if batch:
            answers = await runtime.enqueue_many([JobRequest("once.report", day=day) for day in order])
        else:
            answers = [await runtime.enqueue("once.report", day=day) for day in order]
    finally:
        await runtime.stop()
    print(json.dumps([[day, int(answer), answer.duplicate] for day, answer in zip(order, answers, strict=True)]))


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "batch"))
