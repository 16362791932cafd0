"""What a job asks for (``raise Discard`` / ``raise Retry``), the ``on_event`` hooks and the log lines about jobs.

Every test runs the real runtime on a real store; Discard and Retry on both stores, in-process and in a
child process (the child reports them through its JSON reply). The hooks get the events on their own
thread: a hook that raises or is slow neither breaks nor holds the runtime.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import ConfigError, Discard, JobContext, Queue, Retry, Runtime
from corral.runtime.events import Event, JobEvent, RescueEvent, StallEvent
from corral.runtime.stores.protocol import NewJob
from runtime_helpers import Backend, SqliteBackend, make_runtime


class Recorder:
    """An ``on_event`` hook that keeps what it is given (it runs on the hooks' thread)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            self.threads.add(threading.get_ident())

    def of(self, job_id: int) -> list[JobEvent]:
        return [event for event in self.events if isinstance(event, JobEvent) and event.job_id == job_id]


# -- Discard and Retry ------------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_discard_fails_the_job_at_once_with_its_reason(db: Backend, isolation: str) -> None:
    queue = Queue("d", max_workers=2, timeout=5, isolation=isolation)

    @queue.job("ev.discard", max_attempts=5)
    def discard(ctx: JobContext) -> None:
        raise Discard("the account is closed")

    @queue.job("ev.fine")
    def fine(ctx: JobContext) -> int:
        return 1

    async def main() -> tuple[Any, Any, int]:
        async with make_runtime(db, [queue]) as runtime:
            job_id = await runtime.enqueue("ev.discard")
            status = await runtime.wait(job_id, timeout=10)
            return status, await runtime.wait(await runtime.enqueue("ev.fine"), timeout=10), job_id

    status, other, job_id = asyncio.run(main())
    assert (status.state, status.error) == ("failed", "Discard: the account is closed")
    row = db.job_row(job_id)
    assert (row["attempt"], row["retries"]) == (1, 0)  # one attempt of five: no retry
    assert (other.state, other.result) == ("done", 1)


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_retry_runs_the_job_again_later_without_spending_an_attempt(db: Backend, isolation: str) -> None:
    queue = Queue("r", max_workers=1, timeout=5, isolation=isolation)

    @queue.job("ev.retry", max_attempts=1)  # one attempt: a Retry that spent it would fail the job
    def retry(ctx: JobContext, until: float) -> float:
        if time.time() < until:
            raise Retry(after=0.2)
        return ctx.attempt

    async def main() -> tuple[Any, int, float]:
        async with make_runtime(db, [queue]) as runtime:
            started = time.monotonic()
            job_id = await runtime.enqueue("ev.retry", until=time.time() + 0.5)
            status = await runtime.wait(job_id, timeout=10)
            return status, job_id, time.monotonic() - started

    status, job_id, took = asyncio.run(main())
    assert (status.state, status.result, status.error) == ("done", 1, None)
    row = db.job_row(job_id)
    assert row["attempt"] == 1 and 2 <= row["retries"] <= 4  # every run was attempt 1
    assert row["last_error"] is None  # a Retry is not an error
    assert took >= 0.5


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_a_job_that_always_asks_to_retry_ends_failed_at_the_cap(db: Backend, isolation: str) -> None:
    queue = Queue("c", max_workers=1, timeout=5, isolation=isolation)

    @queue.job("ev.forever", max_attempts=5)
    def forever(ctx: JobContext) -> None:
        raise Retry(after=0)

    async def main() -> tuple[Any, int]:
        async with make_runtime(db, [queue], max_retries_requested=3) as runtime:
            job_id = await runtime.enqueue("ev.forever")
            return await runtime.wait(job_id, timeout=10), job_id

    status, job_id = asyncio.run(main())
    assert (status.state, status.error) == (
        "failed",
        "Retry: the job asked to run later 4 times (max_retries_requested=3)",
    )
    row = db.job_row(job_id)
    assert (row["attempt"], row["retries"]) == (1, 3)  # four runs, all attempt 1: max_attempts untouched


def test_retry_and_the_cap_are_checked() -> None:
    for after in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match=r"Retry\(after=\.\.\.\) must be a finite number of seconds >= 0"):
            Retry(after=after)  # type: ignore[arg-type]
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="max_retries_requested must be an integer >= 0"):
            Runtime(queues=[], store="memory://", max_retries_requested=bad)  # type: ignore[arg-type]


# -- on_event hooks ---------------------------------------------------------------------------------


def test_hooks_get_each_step_of_a_job_with_its_timing(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("h", max_workers=1, timeout=5)
    recorder = Recorder()

    @queue.job("ev.sleepy")
    async def sleepy(ctx: JobContext) -> None:
        await asyncio.sleep(0.1)

    @queue.job("ev.flaky", max_attempts=2)
    async def flaky(ctx: JobContext) -> None:
        raise RuntimeError(f"boom {ctx.attempt}")

    @queue.job("ev.later")
    async def later(ctx: JobContext) -> None:
        if ctx.job_id not in asked:
            asked.add(ctx.job_id)
            raise Retry(after=0.05)

    asked: set[int] = set()

    async def main() -> list[int]:
        async with make_runtime(db, [queue], on_event=recorder) as runtime:
            ids = [await runtime.enqueue(kind) for kind in ("ev.sleepy", "ev.flaky", "ev.later")]
            for job_id in ids:
                await runtime.wait(job_id, timeout=10)
        return ids

    sleepy_id, flaky_id, later_id = asyncio.run(main())  # stop() delivers what is queued
    assert recorder.threads and threading.get_ident() not in recorder.threads  # never on the loop's thread
    started, succeeded = recorder.of(sleepy_id)
    assert (started.name, started.kind, started.queue, started.attempt, started.duration) == (
        "started",
        "ev.sleepy",
        "h",
        1,
        None,
    )
    assert succeeded.name == "succeeded" and 0.1 <= (succeeded.duration or 0) < 1.0
    assert 0 <= succeeded.queued_for < 1.0 and succeeded.error is None
    flaky_events = recorder.of(flaky_id)
    assert [(e.name, e.attempt, e.error) for e in flaky_events] == [
        ("started", 1, None),
        ("retried", 1, "RuntimeError: boom 1"),
        ("started", 2, None),
        ("failed", 2, "RuntimeError: boom 2"),
    ]
    assert (flaky_events[1].retry_in or 0) > 0 and flaky_events[3].retry_in is None
    assert [(e.name, e.attempt, e.error, e.retry_in) for e in recorder.of(later_id)] == [
        ("started", 1, None, None),
        ("retried", 1, None, 0.05),
        ("started", 1, None, None),
        ("succeeded", 1, None, None),
    ]


def test_a_hook_that_raises_or_is_slow_neither_breaks_nor_holds_the_runtime(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("s", max_workers=1, timeout=5)
    recorder = Recorder()

    def broken(event: Event) -> None:
        raise RuntimeError("the hook is broken")

    def slow(event: Event) -> None:
        time.sleep(0.3)

    @queue.job("ev.quick")
    async def quick(ctx: JobContext, n: int) -> int:
        return n

    async def main() -> tuple[list[Any], float]:
        async with make_runtime(db, [queue], on_event=[broken, slow, recorder]) as runtime:
            started = time.monotonic()
            ids = [await runtime.enqueue("ev.quick", n=n) for n in range(3)]
            statuses = [await runtime.wait(job_id, timeout=10) for job_id in ids]
            return statuses, time.monotonic() - started

    with caplog.at_level(logging.ERROR, logger="corral.runtime"):
        statuses, took = asyncio.run(main())
    assert [(s.state, s.result) for s in statuses] == [("done", n) for n in range(3)]
    assert took < 0.9  # six events behind a 0.3 s hook would take 1.8 s on the loop
    job_events = [e for e in recorder.events if isinstance(e, JobEvent)]
    assert sorted(e.name for e in job_events) == ["started"] * 3 + ["succeeded"] * 3
    # the broken hook raised on every event (a loaded machine may add a loop stall), and the hooks
    # after it got each one all the same
    broken_lines = [r for r in caplog.records if "event hook" in r.getMessage()]
    assert len(broken_lines) == len(recorder.events) >= 6
    assert "test_a_hook_that_raises_or_is_slow" in broken_lines[0].getMessage()
    assert broken_lines[0].exc_info is not None


def test_rescues_and_loop_stalls_are_events(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("x", max_workers=1, timeout=5)
    recorder = Recorder()

    @queue.job("ev.blocking", max_attempts=1)
    async def blocking(ctx: JobContext) -> None:
        time.sleep(0.8)  # holds the event loop: a stall of every queue

    async def main() -> None:
        async with make_runtime(db, [], on_event=recorder) as rescuing:  # works no queue, rescues every 0.2 s
            lost = NewJob(
                queue="x", kind="ev.blocking", args_json="{}", key=None, run_at=0, max_attempts=2, lease_seconds=0.1
            )
            await rescuing.store.enqueue([lost])
            await rescuing.store.claim("x", 1, "a-lost-worker")
            await asyncio.sleep(0.6)  # its lease expires
        async with make_runtime(db, [queue], on_event=recorder, rescue_interval=60) as runtime:
            job_id = await runtime.enqueue("ev.blocking")
            await runtime.wait(job_id, timeout=10)

    asyncio.run(main())
    rescues = [e for e in recorder.events if isinstance(e, RescueEvent)]
    assert [e.count for e in rescues] == [1]
    stalls = [e for e in recorder.events if isinstance(e, StallEvent)]
    assert stalls and stalls[0].queues == ("x",) and stalls[0].duration >= 0.5


def test_on_event_must_be_callables() -> None:
    for bad in ("print", [print, 3], 7):
        with pytest.raises(ConfigError, match="on_event must be a callable or a sequence of callables"):
            Runtime(queues=[], store="memory://", on_event=bad)  # type: ignore[arg-type]


# -- logging ----------------------------------------------------------------------------------------


def test_log_lines_say_the_outcome_with_structured_fields(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("l", max_workers=1, timeout=5)

    @queue.job("ev.ok")
    async def ok(ctx: JobContext) -> None:
        await asyncio.sleep(0.05)

    @queue.job("ev.bad", max_attempts=2)
    async def bad(ctx: JobContext) -> None:
        raise KeyError(f"missing {ctx.attempt}")

    async def main() -> tuple[int, int]:
        async with make_runtime(db, [queue]) as runtime:
            ok_id, bad_id = await runtime.enqueue("ev.ok"), await runtime.enqueue("ev.bad")
            await runtime.wait(ok_id, timeout=10)
            await runtime.wait(bad_id, timeout=10)
            return ok_id, bad_id

    with caplog.at_level(logging.INFO, logger="corral.runtime"):
        ok_id, bad_id = asyncio.run(main())

    def about(job_id: int) -> list[logging.LogRecord]:
        return [r for r in caplog.records if getattr(r, "job_id", None) == job_id]

    (success,) = about(ok_id)
    assert success.levelno == logging.INFO and "succeeded in" in success.getMessage()
    assert (success.kind, success.queue, success.attempt) == ("ev.ok", "l", 1)  # type: ignore[attr-defined]
    assert 50 <= success.duration_ms < 1000  # type: ignore[attr-defined]
    retry, final = about(bad_id)
    assert retry.levelno == logging.WARNING and "attempt 1/2 failed, will retry: KeyError: 'missing 1'" in (
        retry.getMessage()
    )
    assert final.levelno == logging.ERROR and "attempt 2/2 failed for good: KeyError: 'missing 2'" in (
        final.getMessage()
    )
    assert "Traceback (most recent call last)" in final.getMessage() and 'raise KeyError(f"missing' in (
        final.getMessage()
    )
    assert (final.kind, final.attempt) == ("ev.bad", 2)  # type: ignore[attr-defined]


def test_an_attempt_the_hard_stop_interrupts_ends_released(tmp_path: Path) -> None:
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("z", max_workers=1, timeout=30)
    recorder = Recorder()

    @queue.job("ev.long")
    async def long(ctx: JobContext) -> None:
        await asyncio.sleep(20)

    async def main() -> int:
        async with make_runtime(db, [queue], on_event=recorder, grace=0.1) as runtime:
            job_id = await runtime.enqueue("ev.long")
            while not recorder.of(job_id):  # it started
                await asyncio.sleep(0.01)
        return job_id

    job_id = asyncio.run(main())
    assert [(e.name, e.error) for e in recorder.of(job_id)] == [
        ("started", None),
        ("released", "interrupted by the hard stop"),
    ]
    assert db.job_row(job_id)["state"] == "waiting"
