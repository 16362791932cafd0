"""Lifecycle: soft-then-hard stop, SIGTERM, crash rescue across processes, relay, waiters, periodic, detach."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import JobContext, Queue, detach
from runtime_helpers import Backend, make_runtime


def test_stop_waits_for_short_jobs_and_releases_long_ones(db: Backend) -> None:
    queue = Queue("q", max_workers=4, timeout=30)
    finished: list[str] = []
    cancelled: list[str] = []

    @queue.job("short")
    async def short(ctx: JobContext) -> None:
        await asyncio.sleep(0.2)
        finished.append("short")

    @queue.job("long")
    async def long(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("long")
            raise

    @queue.job("later")
    async def later(ctx: JobContext) -> None:
        finished.append("later")

    runtime = make_runtime(db, [queue])

    async def main() -> tuple[int, int, int]:
        await runtime.start()
        s = await runtime.enqueue("short")
        lg = await runtime.enqueue("long")
        await asyncio.sleep(0.1)
        lt = await runtime.enqueue("later", delay=60)  # not runnable yet: stays waiting
        began = time.monotonic()
        await runtime.stop(grace=0.5)
        assert 0.4 < time.monotonic() - began < 3
        return s, lg, lt

    s, lg, lt = asyncio.run(main())
    assert finished == ["short"] and cancelled == ["long"]
    assert db.job_row(s)["state"] == "done"
    long_row = db.job_row(lg)
    assert (long_row["state"], long_row["attempt"], long_row["worker_id"]) == ("waiting", 0, None)
    assert db.job_row(lt)["state"] == "waiting"

    # a new runtime picks the released job up again, attempt 1 (the interrupted one was refunded)
    attempts: list[int] = []
    queue2 = Queue("q", max_workers=1, timeout=5)

    @queue2.job("long")
    async def long_again(ctx: JobContext) -> None:
        attempts.append(ctx.attempt)

    async def again() -> None:
        async with make_runtime(db, [queue2]) as rt:
            assert (await rt.wait(lg, timeout=3)).state == "done"

    asyncio.run(again())
    assert attempts == [1]


def enqueue_snippet(kind: str, count: int, args: str = "") -> str:
    """Python code that enqueues from another process that works no queue itself."""
    return (
        "import asyncio, crashapp\n"
        "async def main():\n"
        "    rt = crashapp.runtime\n"
        "    await rt.start(queues=[])\n"
        f"    for n in range({count}): await rt.enqueue({kind!r}{args})\n"
        "    await rt.stop()\n"
        "asyncio.run(main())\n"
    )


def test_sigterm_stops_worker_gracefully_and_releases_jobs(cli: Any, db: Backend, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    cli.python(enqueue_snippet("hang.forever", 3))
    worker = cli.start_worker("crashapp:runtime", CORRAL_TEST_LOG=str(log), CORRAL_TEST_GRACE="0.3")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and db.state_counts().get("running", 0) < 2:
            time.sleep(0.05)
        assert db.state_counts() == {"running": 2, "waiting": 1}  # hang has max_workers=2
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    assert db.state_counts() == {"waiting": 3}
    assert db.scalar("SELECT MAX(attempt) FROM corral_jobs") == 0  # no attempt spent
    assert log.read_text().count("started") == 2


def test_crash_rescue_with_sigkilled_worker_processes(cli: Any, db: Backend, tmp_path: Path) -> None:
    log = tmp_path / "completions.txt"
    jobs = 200
    cli.python(enqueue_snippet("crash.step", jobs, ", n=n"))
    env = {"CORRAL_TEST_LOG": str(log)}
    workers = [cli.start_worker("crashapp:runtime", "--queues", "work", **env) for _ in range(3)]
    rng = random.Random(1234)
    kills = 0
    began = time.monotonic()
    try:
        while time.monotonic() - began < 50:
            if db.state_counts().get("done", 0) == jobs:
                break
            if kills < 10:
                time.sleep(rng.uniform(0.15, 0.6))
                victim = rng.randrange(len(workers))
                workers[victim].kill()  # SIGKILL, mid-job
                workers[victim].wait()
                kills += 1
                workers[victim] = cli.start_worker("crashapp:runtime", "--queues", "work", **env)
            else:
                time.sleep(0.1)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
    counts = db.state_counts()
    assert counts == {"done": jobs}, counts  # none lost, none left running or failed
    completed = {int(line.split()[0]) for line in log.read_text().splitlines()}
    assert completed == set(range(jobs))  # every job's body ran to the end at least once
    rescued = db.scalar("SELECT COUNT(*) FROM corral_jobs WHERE last_error LIKE 'lease expired%'")
    assert kills == 10
    assert rescued > 0  # some jobs really were interrupted mid-run and rescued


def test_a_job_holding_its_workers_event_loop_keeps_its_lease_and_its_key(
    cli: Any, db: Backend, tmp_path: Path
) -> None:
    # Two workers and a producer that only rescues (start(queues=[])), all with rescue_interval 0.2;
    # each job blocks its worker's loop for 5 s, past its 2 s lease (timeout 1 + 1). Bound: no other
    # process rescues it, the two jobs of key "k" never run at once, and the store records the
    # worker's own outcome (its timeout), not "lease expired".
    log = tmp_path / "blocked.txt"
    env = {"CORRAL_TEST_LOG": str(log)}
    workers = [cli.start_worker("blockingapp:runtime", **env) for _ in range(2)]
    try:
        cli.python(
            "import asyncio\n"
            "from blockingapp import runtime\n"
            "async def main():\n"
            "    await runtime.start(queues=[])\n"
            "    for _ in range(2):\n"
            "        await runtime.enqueue('block.loop', seconds=5, key='k')\n"
            "    await asyncio.sleep(14)\n"
            "    await runtime.stop()\n"
            "asyncio.run(main())\n",
            timeout=40,
            **env,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and db.state_counts().get("failed", 0) < 2:
            time.sleep(0.1)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
    rows = db.rows("SELECT id, state, attempt, last_error FROM corral_jobs ORDER BY id")
    assert [(row["state"], row["attempt"]) for row in rows] == [("failed", 1), ("failed", 1)], rows
    for row in rows:
        assert row["last_error"].startswith("TimeoutError: job ran 5."), row
    runs: dict[int, list[float]] = {}
    for line in log.read_text().splitlines():
        _, job_id, at, _ = line.split()
        runs.setdefault(int(job_id), []).append(float(at))
    assert sorted(runs) == [1, 2] and all(len(span) == 2 for span in runs.values()), runs  # one run each
    first, second = sorted(runs.values())
    assert first[1] <= second[0], runs  # per_key=1: the second started after the first ended


@pytest.mark.parametrize("second_signal", [False, True], ids=["grace-ends", "second-signal"])
def test_a_stop_held_by_job_code_on_the_loop_ends_the_worker_at_its_deadline_with_its_jobs_put_back(
    cli: Any, db: Backend, tmp_path: Path, second_signal: bool
) -> None:
    # An async job blocks its worker's loop for 30 s. The stop cannot run on the loop, so the worker's
    # overdue thread puts the job back (unspent, its key slot freed) and ends the process: at the grace
    # (1 s), or right after a second signal when the grace is long (60 s).
    log = tmp_path / "blocked.txt"
    grace = "60" if second_signal else "1"
    worker = cli.start_worker("blockingapp:runtime", "--grace", grace, CORRAL_TEST_LOG=str(log))
    try:
        cli.python(
            "import asyncio\n"
            "from blockingapp import runtime\n"
            "async def main():\n"
            "    await runtime.start(queues=[])\n"
            "    await runtime.enqueue('block.loop', seconds=30, key='k')\n"
            "    await runtime.stop()\n"
            "asyncio.run(main())\n"
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (log.exists() and "start" in log.read_text()):
            time.sleep(0.05)
        time.sleep(0.3)  # well inside the job's sleep: the loop is held
        signalled = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        if second_signal:
            time.sleep(0.5)
            worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 3  # EXIT_OVERDUE
        took = time.monotonic() - signalled
    finally:
        if worker.poll() is None:
            worker.kill()
    assert took < 4.0, took  # the grace (or the second signal) plus about a second, not the job's 30 s
    rows = db.rows("SELECT state, attempt FROM corral_jobs")
    assert [(row["state"], row["attempt"]) for row in rows] == [("waiting", 0)], rows
    assert db.scalar("SELECT COUNT(*) FROM corral_key_leases WHERE holder IS NOT NULL") == 0


def test_relay_moves_a_burst_in_small_passes_exactly_once(db: Backend) -> None:
    seen: list[int] = []

    def declare() -> Queue:
        index = Queue("index", max_workers=4, timeout=5, poll=0.05)

        @index.job("corpus.index", on="note.created")
        async def corpus_index(ctx: JobContext, note_id: int) -> None:
            seen.append(note_id)

        @index.job("audit.log", on=["note.created"])
        async def audit(ctx: JobContext, note_id: int) -> None:
            return None

        return index

    publisher = make_runtime(db, [declare()], relay=0)
    relays = [make_runtime(db, [declare()], relay=1, relay_interval=0.01) for _ in range(3)]

    async def main() -> None:
        async with publisher:
            for note_id in range(2000):
                await publisher.publish("note.created", {"note_id": note_id})
            await asyncio.gather(*(rt.start() for rt in relays))
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    counts = await publisher.counts()
                    if counts["index"].done == 4000:
                        break
                    await asyncio.sleep(0.1)
            finally:
                await asyncio.gather(*(rt.stop() for rt in relays))

    asyncio.run(main())
    passes = [size for rt in relays for size in rt.stats.relay_passes]
    assert sum(passes) == 2000
    assert max(passes) <= 200 and len(passes) >= 10
    assert sorted(seen) == list(range(2000))  # each event became exactly one corpus.index job
    assert db.scalar("SELECT COUNT(*) FROM corral_events") == 0
    assert db.scalar("SELECT COUNT(DISTINCT event_id) FROM corral_jobs") == 2000


def test_waiters_are_capped_per_queue(db: Backend) -> None:
    slow = Queue("slow", max_workers=1, timeout=30)
    other = Queue("other", max_workers=1, timeout=30)

    @slow.job("slow.hang")
    async def hang(ctx: JobContext) -> None:
        await asyncio.sleep(30)

    @other.job("other.quick")
    async def quick(ctx: JobContext) -> int:
        return 1

    runtime = make_runtime(db, [slow, other], grace=0.1)

    async def main() -> None:
        async with runtime:
            ids = [await runtime.enqueue("slow.hang") for _ in range(65)]
            waits = [asyncio.ensure_future(runtime.wait(job_id, timeout=1.0)) for job_id in ids[:64]]
            await asyncio.sleep(0.05)
            began = time.monotonic()
            refused = await runtime.wait(ids[64], timeout=1.0)
            assert time.monotonic() - began < 0.05
            assert (refused.waited, refused.state) == (False, "not-waited")
            # another queue's waiters are not affected
            quick_id = await runtime.enqueue("other.quick")
            assert (await runtime.wait(quick_id, timeout=2)).result == 1
            timed_out = await asyncio.gather(*waits)
            assert all(s.waited and s.state == "pending" for s in timed_out)
            # slots are free again
            again = await runtime.wait(ids[64], timeout=0.05)
            assert again.waited

    asyncio.run(main())


def test_wait_across_runtimes_uses_the_notifier(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5, poll=0.05)

    @queue.job("answer")
    async def answer(ctx: JobContext) -> int:
        return 42

    async def main() -> None:
        # producer runs no workers; the consumer does; the producer waits through its notifier
        p = make_runtime(db, [queue])
        c = make_runtime(db, [queue])
        await p.start(queues=[])
        await c.start()
        try:
            job_id = await p.enqueue("answer")
            status = await p.wait(job_id, timeout=3)
            assert (status.state, status.result) == ("done", 42)
            assert await p.wait(job_id, timeout=0.1) == status  # finished jobs answer at once
        finally:
            await c.stop()
            await p.stop()

    asyncio.run(main())


def test_periodic_jobs_run_once_per_period_across_runtimes(db: Backend) -> None:
    runs: list[float] = []

    def declare() -> Queue:
        maintenance = Queue("maintenance", max_workers=1, timeout=5, poll=0.05)

        @maintenance.periodic("sessions.prune", every=0.3, run_on_start=True)
        async def prune(ctx: JobContext) -> None:
            runs.append(time.monotonic())

        return maintenance

    runtimes = [make_runtime(db, [declare()]) for _ in range(3)]

    async def main() -> None:
        await asyncio.gather(*(rt.start() for rt in runtimes))
        await asyncio.sleep(1.45)
        await asyncio.gather(*(rt.stop() for rt in runtimes))

    asyncio.run(main())
    assert 3 <= len(runs) <= 6, runs  # ~1.45 / 0.3 + the run on start, never x3


def test_detach_absorbs_errors_and_stop_cancels(db: Backend, caplog: pytest.LogCaptureFixture) -> None:
    runtime = make_runtime(db, [])
    events: list[str] = []

    async def boom() -> None:
        raise RuntimeError("plumbing broke")

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    def sync_plumbing() -> None:
        events.append("sync ran")

    async def main() -> None:
        async with runtime:
            detach(boom(), name="boom")
            detach(forever, name="forever")
            detached_sync = detach(sync_plumbing, name="sync")
            await asyncio.sleep(0.05)
            await detached_sync
            with pytest.raises(TypeError):
                detach(42, name="nope")  # type: ignore[arg-type]

    with caplog.at_level(logging.ERROR, logger="corral.runtime"):
        asyncio.run(main())
    assert "detached task 'boom' failed" in caplog.text and "plumbing broke" in caplog.text
    assert events == ["sync ran", "cancelled"]


def test_jobs_cli_counts_and_failed(cli: Any, db: Backend) -> None:
    queue = Queue("work", max_workers=1, timeout=5)

    @queue.job("crash.step", max_attempts=1)
    async def step(ctx: JobContext, n: int) -> None:
        if n == 1:
            raise ValueError("n must not be 1")

    async def main() -> None:
        async with make_runtime(db, [queue]) as rt:
            ids = [await rt.enqueue("crash.step", n=n) for n in range(3)]
            for job_id in ids:
                await rt.wait(job_id, timeout=3)
            await rt.enqueue("crash.step", n=5, delay=60)

    asyncio.run(main())
    result = cli.run("jobs", "crashapp:runtime")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["queue", "waiting", "running", "retrying", "failed", "done", "cancelled"]
    assert lines[1].split() == ["work", "1", "0", "0", "1", "2", "0"]
    assert lines[2].split() == ["hang", "0", "0", "0", "0", "0", "0"]
    failed = cli.run("jobs", "crashapp:runtime", "list", "--state", "failed")
    assert failed.returncode == 0, failed.stderr
    assert "work/crash.step attempt 1/1" in failed.stdout and "ValueError: n must not be 1" in failed.stdout
    bad = cli.run("jobs", "nosuchthing")
    assert bad.returncode == 2 and "MODULE:RUNTIME" in bad.stderr


def test_hard_stop_releases_a_running_sync_job(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=30)
    entered = threading.Event()

    @queue.job("sync.stuck", isolation="in-process")
    def stuck(ctx: JobContext) -> None:
        entered.set()
        while not ctx.stop_requested:  # cooperative: returns once the runtime asks
            time.sleep(0.01)

    runtime = make_runtime(db, [queue])

    async def main() -> int:
        await runtime.start()
        job_id = await runtime.enqueue("sync.stuck")
        while not entered.is_set():
            await asyncio.sleep(0.01)
        await runtime.stop(grace=0.2)
        return job_id

    job_id = asyncio.run(main())
    row = db.job_row(job_id)
    assert (row["state"], row["attempt"]) == ("waiting", 0)
