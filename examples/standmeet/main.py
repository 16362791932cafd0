"""Run StandMeet once: create notes, enqueue a few jobs, work them until done, print the results.

``python examples/standmeet/main.py`` (or ``cd examples && python -m standmeet``). The job
database goes to a temporary directory unless STANDMEET_JOBS_DB is set.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path


async def run() -> int:
    from standmeet import notes
    from standmeet.infra.warmup import WARM, start_warmup
    from standmeet.jobs import runtime

    async with runtime:
        start_warmup()
        await notes.create_note(runtime, owner="ada", text="Standup at nine: ship the relay.")
        await notes.create_note(runtime, owner="lin", text="Relay shipped; webhooks next.")
        reindex = await runtime.enqueue("corpus.reindex")
        fetched = await runtime.enqueue("jobs.fetch_source", source="remoteok")
        mailed = await runtime.enqueue("owner.notify", owner="ada", subject="daily digest")
        for label, job_id in (("corpus.reindex", reindex), ("jobs.fetch_source", fetched), ("owner.notify", mailed)):
            status = await runtime.wait(job_id, timeout=5)
            print(f"{label:<20} #{job_id}: {status.state} -> {status.result}")

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            counts = await runtime.counts()
            if all(c.waiting == c.running == c.retrying == 0 for c in counts.values()):
                break
            await asyncio.sleep(0.1)
        print()
        print(f"{'queue':<12} {'done':>5} {'failed':>7}")
        for name, c in counts.items():
            print(f"{name:<12} {c.done:>5} {c.failed:>7}")
        print()
        print("search 'relay' ->", sorted(notes.search("relay")))
        print("cache warmed   ->", WARM.get("search", False))
        return 0 if all(c.failed == 0 for c in counts.values()) else 1


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory(prefix="standmeet-") as tmp:
        os.environ.setdefault("STANDMEET_JOBS_DB", str(Path(tmp) / "jobs.db"))
        return asyncio.run(run())


if __name__ == "__main__":
    raise SystemExit(main())
