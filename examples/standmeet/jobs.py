"""StandMeet's queues and job kinds (the seed's numbers) and the module-level ``runtime``.

Run a worker with ``python -m corral.runtime.cli worker standmeet.jobs:runtime`` from examples/.
"""

from __future__ import annotations

import os
import time

from corral.runtime import JobContext, Queue, Runtime

from standmeet.infra.http import post
from standmeet.notes import NOTES, SEARCH_INDEX

# Requests wait on index and notify jobs: those queues poll every 100 ms, the others every 1 s.
index = Queue("index", max_workers=4, timeout=30, poll=0.1)
notify = Queue("notify", max_workers=2, timeout=30, poll=0.1)
webhook = Queue("webhook", max_workers=8, timeout=15, per_key=1)
maintenance = Queue("maintenance", max_workers=1, timeout=600)
fetch = Queue("fetch", max_workers=3)  # no queue timeout: every fetch kind declares its own

ENDPOINTS = {1: "https://hooks.example.com/a", 2: "https://hooks.example.com/b"}


@index.job("corpus.index", on="note.created")
async def corpus_index(ctx: JobContext, note_id: int) -> int:
    note = NOTES[note_id]
    words = {word.strip(".,:;!?").lower() for word in note.text.split()}
    for word in words:
        SEARCH_INDEX.setdefault(word, set()).add(note_id)
    return len(words)


@index.job("corpus.reindex", timeout=600, max_attempts=3)
async def corpus_reindex(ctx: JobContext) -> int:
    SEARCH_INDEX.clear()
    for note_id in NOTES:
        await corpus_index(ctx, note_id)
    return len(NOTES)


@notify.job("owner.notify")
def owner_notify(ctx: JobContext, owner: str, subject: str) -> str:
    # A blocking SMTP call: a plain def runs in a child process of the runtime's pool, killed at its
    # timeout; what it did comes back as its (JSON) result, not through this process's memory.
    time.sleep(0.02)
    return f"mailed {owner}: {subject}"


@webhook.job("webhook.fanout", timeout=30, on="note.created")
async def webhook_fanout(ctx: JobContext, note_id: int) -> list[int]:
    jobs = [
        await ctx.enqueue("webhook.deliver", key=f"endpoint-{endpoint}", endpoint=endpoint, note_id=note_id)
        for endpoint in ENDPOINTS
    ]
    return jobs


@webhook.job("webhook.deliver", max_attempts=8)
async def webhook_deliver(ctx: JobContext, endpoint: int, note_id: int) -> int:
    # per_key=1 on the queue: at most one delivery per endpoint in flight, across processes.
    return await post(ENDPOINTS[endpoint], {"note_id": note_id})


@maintenance.periodic("sessions.prune", every=3600, run_on_start=True)
async def sessions_prune(ctx: JobContext) -> str:
    return "pruned 0 sessions"


@fetch.job("jobs.fetch_source", timeout=60)
async def fetch_source(ctx: JobContext, source: str) -> dict[str, object]:
    return {"source": source, "new_postings": 3}


STORE = "sqlite:///" + os.environ.get("STANDMEET_JOBS_DB", "var/standmeet-jobs.db")

runtime = Runtime(
    queues=[index, notify, webhook, maintenance, fetch],
    store=STORE,
    max_conns=40,  # 4 + 2 + 8 + 1 + 3 + relay 1 = 19 <= 20
    relay=1,
)
