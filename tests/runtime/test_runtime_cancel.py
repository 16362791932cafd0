"""Cancelling jobs, on SQLite and PostgreSQL: a waiting job never runs; a running attempt is stopped the way
its isolation allows (task cancelled, child killed, ``ctx.stop_requested``), from this process or another;
the job ends ``cancelled`` and is not retried; a job that ignores its cancellation keeps its worker slot
until it really stops (the max_workers bound holds)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from pathlib import Path

import pytest
from conftest import Cli
from corral.runtime import JobArgumentError, JobContext, Queue
from runtime_helpers import Backend, alive, make_runtime


def _until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


async def _until_async(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_cancelled_waiting_job_never_runs(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)
    ran: list[int] = []

    @queue.job("k")
    async def k(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    producer, worker = make_runtime(db, [queue]), make_runtime(db, [queue])

    async def main() -> None:
        await producer.start(queues=[])
        try:
            cancelled, kept = await producer.enqueue("k"), await producer.enqueue("k", delay=0.2)
            delayed = await producer.enqueue("k", delay=0.2)
            assert await producer.cancel(cancelled, delayed) == [cancelled, delayed]
            assert await producer.cancel(cancelled) == []  # already final
            assert (await producer.wait(cancelled, timeout=1)).state == "cancelled"
            with pytest.raises(JobArgumentError, match="cancel takes job ids"):
                await producer.cancel("1")  # type: ignore[arg-type]
            assert await producer.cancel(2**63, 0) == []  # ids no store holds (SQLite's driver would overflow)
        finally:
            await producer.stop()
        async with worker:
            assert (await worker.wait(kept, timeout=5)).state == "done"
            await asyncio.sleep(0.3)
        assert ran == [kept]
        assert db.state_counts() == {"cancelled": 2, "done": 1}

    asyncio.run(main())


def test_a_running_async_job_has_its_task_cancelled_and_is_not_retried(db: Backend) -> None:
    queue = Queue("q", max_workers=2, timeout=30)
    seen: list[str] = []

    @queue.job("k", max_attempts=5)
    async def k(ctx: JobContext) -> str:
        seen.append("start")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "finished"

    events: list[object] = []
    runtime = make_runtime(db, [queue], on_event=events.append)

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("k")
            await _until_async(lambda: seen == ["start"])
            started = time.monotonic()
            assert await runtime.cancel(job_id) == [job_id]
            status = await runtime.wait(job_id, timeout=5)
            assert status.state == "cancelled"
            await _until_async(lambda: runtime.stats.cancelled_attempts == 1)
            assert time.monotonic() - started < 1.0
            await asyncio.sleep(0.3)
        assert seen == ["start", "cancelled"]  # one attempt: a cancelled job is not retried
        assert runtime.stats.failed_attempts == 0
        # The on_event hooks see the attempt end as cancelled (one ending per start).
        names = [getattr(event, "name", None) for event in events if getattr(event, "job_id", None) == job_id]
        assert names == ["started", "cancelled"]
        row = db.job_row(job_id)
        assert (row["state"], row["attempt"], row["result"]) == ("cancelled", 1, None)

    asyncio.run(main())


def test_a_job_cancelled_while_it_holds_the_loop_past_its_timeout_is_reported_cancelled(
    db: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """Its timeout's failure reaches the store after the cancel: the attempt is reported cancelled, not
    refused as if another attempt had settled it."""
    queue = Queue("q", max_workers=1, timeout=0.5)
    holding = threading.Event()

    @queue.job("blocks", max_attempts=3)
    async def blocks(ctx: JobContext) -> None:
        holding.set()
        time.sleep(1.5)  # the point: the worker's loop is held past the timeout

    events: list[object] = []
    worker = make_runtime(db, [queue], on_event=events.append)
    canceller = make_runtime(db, [queue])

    def cancel_from_elsewhere(job_id: int) -> None:
        assert holding.wait(10)

        async def cancel() -> None:  # another runtime on its own loop: the worker's is held
            await canceller.start(queues=[])
            try:
                assert await canceller.cancel(job_id) == [job_id]
            finally:
                await canceller.stop()

        asyncio.run(cancel())

    async def main() -> int:
        async with worker:
            job_id = await worker.enqueue("blocks")
            thread = threading.Thread(target=cancel_from_elsewhere, args=(job_id,))
            thread.start()
            await _until_async(lambda: worker.stats.cancelled_attempts == 1)
            thread.join(10)
            return job_id

    with caplog.at_level(logging.INFO, logger="corral.runtime"):
        job_id = asyncio.run(main())
    assert db.job_row(job_id)["state"] == "cancelled"
    assert worker.stats.failed_attempts == 0
    assert "refused its outcome" not in caplog.text
    assert f"job {job_id} (blocks) attempt 1 was cancelled: its outcome (TimeoutError" in caplog.text
    names = [getattr(event, "name", None) for event in events if getattr(event, "job_id", None) == job_id]
    assert names == ["started", "cancelled"]


def test_an_async_job_swallowing_its_cancellation_keeps_its_slot_until_it_stops(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=30)
    events: list[tuple[str, float]] = []
    release = asyncio.Event()

    @queue.job("stubborn")
    async def stubborn(ctx: JobContext) -> str:
        events.append(("stubborn start", time.monotonic()))
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # the misbehaviour under test
                await release.wait()
        events.append(("stubborn end", time.monotonic()))
        return "finished anyway"

    @queue.job("next")
    async def next_job(ctx: JobContext) -> None:
        events.append(("next start", time.monotonic()))

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("stubborn")
            await _until_async(lambda: len(events) == 1)
            assert await runtime.cancel(job_id) == [job_id]
            after = await runtime.enqueue("next")
            await asyncio.sleep(0.5)
            assert [name for name, _ in events] == ["stubborn start"]  # still running: the only slot is taken
            release.set()
            assert (await runtime.wait(after, timeout=5)).state == "done"
            assert (await runtime.wait(job_id, timeout=1)).state == "cancelled"
        names = [name for name, _ in events]
        assert names == ["stubborn start", "stubborn end", "next start"]
        assert events[2][1] >= events[1][1]
        assert db.job_row(job_id)["result"] is None  # its late result is not recorded: it stays cancelled

    asyncio.run(main())


def test_an_in_process_sync_job_sees_stop_requested(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=30)
    looked = threading.Event()

    @queue.job("sync.loop", isolation="in-process")
    def loop(ctx: JobContext) -> str:
        while not ctx.stop_requested:
            looked.set()
            time.sleep(0.01)
        return "stopped"

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("sync.loop")
            await _until_async(looked.is_set)
            await runtime.cancel(job_id)
            await _until_async(lambda: runtime.stats.cancelled_attempts == 1, timeout=5)
            assert (await runtime.wait(job_id, timeout=1)).state == "cancelled"
        assert db.job_row(job_id)["result"] is None

    asyncio.run(main())


def _log_lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("kind", ["long.wait", "long.spin"])
def test_a_job_running_in_another_process_is_stopped_by_a_cancel_from_the_cli(
    cli: Cli, tmp_path: Path, kind: str
) -> None:
    log = tmp_path / "jobs.log"
    cli.python(
        "import asyncio, cancelapp\n"
        "async def main():\n"
        "    await cancelapp.runtime.start(queues=[])\n"
        f"    await cancelapp.runtime.enqueue({kind!r})\n"
        "    await cancelapp.runtime.stop()\n"
        "asyncio.run(main())\n",
        CORRAL_TEST_LOG=str(log),
    )
    worker = cli.start_worker("cancelapp:runtime", CORRAL_TEST_LOG=str(log))
    try:
        _until(lambda: any(line[0] == "start" for line in _log_lines(log)), timeout=20)
        (start,) = _log_lines(log)
        job_id, pid = int(start[1]), int(start[2])
        done = cli.run("jobs", "cancelapp:runtime", "cancel", str(job_id), "--format", "json")
        cancelled_at = time.time()  # the cancel committed before the command returned
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert (document["cancelled"], document["not_cancelled"]) == ([job_id], [])
        if kind == "long.wait":
            _until(lambda: len(_log_lines(log)) == 2, timeout=5)
            (_, logged_id, when) = _log_lines(log)[1]
            assert int(logged_id) == job_id and float(when) - cancelled_at < 1.5  # noticed within the poll
        else:
            _until(lambda: not alive(pid), timeout=5)  # the busy child was killed
            assert time.time() - cancelled_at < 1.5
        again = cli.run("jobs", "cancelapp:runtime", "cancel", str(job_id), "999999")
        assert again.returncode == 1
        assert f"#{job_id} not cancelled" in again.stdout and "#999999 not cancelled" in again.stdout
        time.sleep(0.5)
        assert cli.db.job_row(job_id)["state"] == "cancelled"
        assert len([line for line in _log_lines(log) if line[0] == "start"]) == 1  # not retried
    finally:
        worker.terminate()
        assert worker.wait(timeout=30) == 0
