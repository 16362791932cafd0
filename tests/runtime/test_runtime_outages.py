"""A store that is down, locked or full is StoreUnavailable from enqueue(), publish() and wait(), in bounded time.

PostgreSQL: the test server is really stopped (``pg_ctl stop``) and started again. SQLite: another
connection really holds the write lock, and the file really fills up (``max_page_count``). The driver's
error is chained (``__cause__``); a call that ran into ``enqueue_timeout`` chains the timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from corral.runtime import JobContext, JobStatus, Queue, Runtime, StoreUnavailable
from corral.runtime.completer import Completer, Finished
from corral.runtime.events import EventHooks
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.postgres import PostgresStore
from corral.runtime.stores.protocol import Completion, NewJob
from corral.runtime.stores.sqlite import SqliteStore
from runtime_helpers import PostgresBackend, SqliteBackend

TIMEOUT = 0.5
SLACK = 1.0  # scheduling on a loaded 2-core machine


def _queue() -> Queue:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("takes.text", on="text.written")
    async def takes_text(ctx: JobContext, text: str) -> None:
        return None

    return queue


async def _refused_in_time(call: Any, cause: tuple[type[BaseException], ...]) -> StoreUnavailable:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as refused:
        await call
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert isinstance(refused.value.__cause__, cause), repr(refused.value.__cause__)
    return refused.value


def test_a_stopped_postgresql_is_store_unavailable_within_the_timeout(pg_server: Any, pg: PostgresBackend) -> None:
    store = PostgresStore(pg.url, max_size=4, min_size=1, connect_timeout=TIMEOUT)
    runtime = Runtime(queues=[_queue()], store=store, enqueue_timeout=TIMEOUT, max_conns=4)

    async def main() -> None:
        async with runtime:
            before = await runtime.enqueue("takes.text", text="before")
            assert (await runtime.wait(before, timeout=5)).state == "done"
            pg_server.pause()
            try:
                reasons = (psycopg.Error, TimeoutError)
                for _ in range(2):  # a broken pooled connection first, then no connection at all
                    await _refused_in_time(runtime.enqueue("takes.text", text="lost"), reasons)
                    await _refused_in_time(runtime.publish("text.written", {"text": "lost"}), reasons)
                    await _refused_in_time(runtime.wait(10_000, timeout=5), reasons)
            finally:
                pg_server.resume()
            deadline = time.monotonic() + 30
            while True:  # the pool reconnects by itself
                try:
                    after = await runtime.enqueue("takes.text", text="after")
                    break
                except StoreUnavailable:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.2)
            assert (await runtime.wait(after, timeout=10)).state == "done"

    asyncio.run(main())
    texts = [row["args"]["text"] for row in pg.rows("SELECT args FROM corral_jobs ORDER BY id")]
    assert texts == ["before", "after"]  # nothing was written while the server was down
    assert pg.scalar("SELECT COUNT(*) AS n FROM corral_events") == 0


def test_waiting_on_a_job_during_a_postgresql_outage_is_store_unavailable_not_pending(
    pg_server: Any, pg: PostgresBackend
) -> None:
    store = PostgresStore(pg.url, max_size=4, min_size=1, connect_timeout=TIMEOUT)
    runtime = Runtime(queues=[_queue()], store=store, enqueue_timeout=TIMEOUT, max_conns=4)

    async def main() -> None:
        await runtime.start(queues=[])  # a producer: nobody runs the job, so it stays unfinished
        try:
            job_id = await runtime.enqueue("takes.text", text="waited")
            # bound holds: with the store up, a wait that times out is "pending"
            assert await runtime.wait(job_id, timeout=0.5) == JobStatus(job_id=job_id, state="pending", waited=True)
            pg_server.pause()
            try:
                started = time.monotonic()
                with pytest.raises(StoreUnavailable) as refused:
                    await runtime.wait(job_id, timeout=15)
                assert time.monotonic() - started < TIMEOUT + 2 * SLACK
                assert isinstance(refused.value.__cause__, psycopg.Error), repr(refused.value.__cause__)
                assert f"job {job_id}" in str(refused.value)
            finally:
                pg_server.resume()
            deadline = time.monotonic() + 30
            while True:  # the pool reconnects by itself; waiting is "pending" again
                try:
                    status = await runtime.wait(job_id, timeout=0.5)
                    break
                except StoreUnavailable:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.2)
            assert status == JobStatus(job_id=job_id, state="pending", waited=True)
        finally:
            await runtime.stop()

    asyncio.run(main())


def test_a_locked_sqlite_file_is_store_unavailable_within_the_timeout(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    runtime = Runtime(queues=[_queue()], store=db.url, enqueue_timeout=TIMEOUT)

    async def main() -> None:
        async with runtime:
            locker = sqlite3.connect(db.path, isolation_level=None)
            locker.execute("BEGIN IMMEDIATE")  # another process's long write transaction
            try:
                await _refused_in_time(runtime.enqueue("takes.text", text="x"), (TimeoutError,))
                await _refused_in_time(runtime.publish("text.written", {"text": "x"}), (TimeoutError,))
            finally:
                locker.execute("ROLLBACK")
                locker.close()

    asyncio.run(main())


def test_enqueues_hung_at_once_are_each_refused_at_their_own_deadline(tmp_path: Path) -> None:
    """One timer serves every call in flight: a call that starts while another waits is refused a
    timeout after its own start, not the first one's, and the task that made it can go on (the
    cancellation that stopped the call is taken back)."""
    db = SqliteBackend(tmp_path / "jobs.db")
    runtime = Runtime(queues=[_queue()], store=db.url, enqueue_timeout=TIMEOUT)

    async def refused_after(delay: float) -> tuple[float, float]:
        await asyncio.sleep(delay)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await runtime.enqueue("takes.text", text="x")
        ended = time.monotonic()
        await asyncio.sleep(0)  # no cancellation is left pending on this task
        return started, ended

    async def main() -> None:
        async with runtime:
            locker = sqlite3.connect(db.path, isolation_level=None)
            locker.execute("BEGIN IMMEDIATE")
            try:
                spans = await asyncio.gather(*(refused_after(delay) for delay in (0.0, 0.2, 0.4)))
            finally:
                locker.execute("ROLLBACK")
                locker.close()
            for started, ended in spans:
                assert TIMEOUT <= ended - started < TIMEOUT + SLACK
            assert (await runtime.wait(await runtime.enqueue("takes.text", text="after"), timeout=5)).state == "done"

    asyncio.run(main())


def test_a_full_sqlite_file_is_store_unavailable_with_the_drivers_error(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    runtime = Runtime(queues=[_queue()], store=db.url, enqueue_timeout=5)
    store = runtime.store
    assert isinstance(store, SqliteStore)

    async def main() -> None:
        async with runtime:
            # the disk is full: SQLite may not grow the file by another page
            await store._run(lambda conn: conn.execute("PRAGMA max_page_count = 1").fetchall())
            big = "x" * 200_000
            with pytest.raises(StoreUnavailable, match="full") as refused:
                await runtime.enqueue("takes.text", text=big)
            assert isinstance(refused.value.__cause__, sqlite3.OperationalError)
            with pytest.raises(StoreUnavailable, match="full"):
                await runtime.publish("text.written", {"text": big})

    asyncio.run(main())
    assert db.scalar("SELECT COUNT(*) AS n FROM corral_jobs") == 0


def test_completions_during_an_outage_are_left_to_the_rescuer_not_retried_row_by_row(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    store = SqliteStore(path=db.path, busy_timeout=0.3)

    async def main() -> None:
        await store.open()
        try:
            new = NewJob(queue="q", kind="k", args_json="{}", key=None, run_at=0, max_attempts=3, lease_seconds=30)
            await store.enqueue([new] * 4)
            claimed = await store.claim("q", 4, "w")
            completer = Completer(
                store=store,
                stats=RuntimeStats(),
                waiters=None,  # type: ignore[arg-type]
                events=EventHooks(()),
            )
            for job in claimed:
                completion = Completion(job_id=job.id, token=job.token, result_json="1")
                completer.submit(Finished(completion=completion, job=job, duration=0.0))
            completer.finish()
            locker = sqlite3.connect(db.path, isolation_level=None)
            locker.execute("BEGIN IMMEDIATE")
            try:
                started = time.monotonic()
                await completer.run()
                # one wait for the lock, not one per row
                assert time.monotonic() - started < 2 * 0.3 + SLACK / 2
            finally:
                locker.execute("ROLLBACK")
                locker.close()
        finally:
            await store.close()

    asyncio.run(main())
    assert db.state_counts() == {"running": 4}  # their leases expire and the rescuer makes them retryable


def test_a_caller_cancelling_its_enqueue_is_cancelled_not_store_unavailable(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    runtime = Runtime(queues=[_queue()], store=db.url, enqueue_timeout=5)

    async def main() -> None:
        async with runtime:
            locker = sqlite3.connect(db.path, isolation_level=None)
            locker.execute("BEGIN IMMEDIATE")
            try:
                enqueue = asyncio.ensure_future(runtime.enqueue("takes.text", text="x"))
                await asyncio.sleep(0.1)
                enqueue.cancel()  # e.g. the request was abandoned: its own cancellation, not the bound's
                with pytest.raises(asyncio.CancelledError):
                    await enqueue
            finally:
                locker.execute("ROLLBACK")
                locker.close()

    asyncio.run(main())
