"""Pruning runs on its own schedule (``prune_interval``), not on the rescuer's."""

from __future__ import annotations

import asyncio
import time

from corral.runtime import JobContext, Queue
from runtime_helpers import Backend, make_runtime


def test_done_jobs_are_pruned_every_prune_interval_whatever_the_rescue_interval(db: Backend) -> None:
    queue = Queue("q", max_workers=2, timeout=5)

    @queue.job("quick")
    async def quick(ctx: JobContext) -> None:
        return None

    # A rescuer that passes once an hour: pruning must not wait for it.
    runtime = make_runtime(db, [queue], keep_done=0.0, prune_interval=0.1, rescue_interval=3600.0)
    pruned_after: list[float] = []

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("quick")
            assert (await runtime.wait(job_id, timeout=5)).state == "done"
            finished = time.monotonic()
            while db.scalar(f"SELECT COUNT(*) AS n FROM corral_jobs WHERE id = {job_id}"):
                assert time.monotonic() - finished < 3, "the done job was not pruned"
                await asyncio.sleep(0.02)
            pruned_after.append(time.monotonic() - finished)
            running = await runtime.enqueue("quick", delay=60)  # not done: never pruned
            await asyncio.sleep(0.3)
            assert db.job_row(running)["state"] == "waiting"

    asyncio.run(main())
    assert pruned_after and pruned_after[0] < 3
