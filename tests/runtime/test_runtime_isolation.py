"""Process isolation: attempts in child processes, killed with SIGKILL at their timeout; crashes fail only their job.

Every test runs the real runtime on both stores, with real child processes. The bound is asserted
from what the jobs log (their start, their pid) and from sampling which children are alive while the
runtime works (``os.kill(pid, 0)``; a child counts as running until the runtime has reaped it), never
from what the runtime says about itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import ConfigError, JobContext, Queue
from corral.runtime.infra import ProcessPool
from corral.runtime.isolation import serve_imported
from runtime_helpers import Backend, alive, make_runtime

APPS = Path(__file__).parent / "apps"


@dataclass
class Run:
    """One attempt as its child logged it, and when the test saw its child alive last."""

    job_id: int
    attempt: int
    pid: int
    key: str
    start: float
    end: float | None = None  # logged by the job when it returned
    last_alive: float = 0.0


@dataclass
class Timeline:
    """Start/end lines the jobs append to ``log`` (any process), and a sampler of their children."""

    log: Path
    runs: dict[tuple[int, int], Run] = field(default_factory=dict)  # by job id and attempt

    def read(self) -> None:
        if not self.log.exists():
            return
        for line in self.log.read_text().splitlines():
            what, job_id, attempt, pid, key, at = line.split()
            attempt_id = (int(job_id), int(attempt))
            if what == "start" and attempt_id not in self.runs:
                self.runs[attempt_id] = Run(*attempt_id, int(pid), key, float(at), last_alive=float(at))
            elif what == "end":
                self.runs[attempt_id].end = float(at)

    def sample(self) -> None:
        self.read()
        now = time.monotonic()
        for run in self.runs.values():
            if run.end is None and alive(run.pid):
                run.last_alive = now

    async def sample_while(self, work: Any) -> Any:
        task = asyncio.ensure_future(work)
        while not task.done():
            self.sample()
            await asyncio.sleep(0.01)
        self.sample()
        return task.result()

    def intervals(self, key: str | None = None) -> list[tuple[float, float]]:
        return [
            (run.start, run.end if run.end is not None else run.last_alive)
            for run in self.runs.values()
            if key is None or run.key == key
        ]

    def peak(self, key: str | None = None) -> int:
        edges = sorted([(start, 1) for start, _ in self.intervals(key)] + [(end, -1) for _, end in self.intervals(key)])
        current = peak = 0
        for _, step in edges:
            current += step
            peak = max(peak, current)
        return peak


def _logger(log: Path) -> Any:
    def write(what: str, ctx: JobContext) -> None:
        with open(log, "a") as out:  # O_APPEND: one short line per write, from any process
            out.write(f"{what} {ctx.job_id} {ctx.attempt} {os.getpid()} {ctx.key or '-'} {time.monotonic()}\n")

    return write


@pytest.fixture
def timeline(tmp_path: Path) -> Iterator[Timeline]:
    line = Timeline(tmp_path / "runs.log")
    yield line
    line.read()
    assert not [run.pid for run in line.runs.values() if alive(run.pid)], "children outlived the runtime"


def test_isolation_defaults_and_bad_values() -> None:
    queue = Queue("iso", max_workers=1, timeout=5)

    @queue.job("iso.sync")
    def sync(ctx: JobContext) -> None: ...

    @queue.job("iso.async")
    async def run_async(ctx: JobContext) -> None: ...

    @queue.job("iso.sync-here", isolation="in-process")
    def sync_here(ctx: JobContext) -> None: ...

    @queue.job("iso.async-child", isolation="process")
    async def async_child(ctx: JobContext) -> None: ...

    isolated = Queue("iso-all", max_workers=1, timeout=5, isolation="process")

    @isolated.job("iso.inherits")
    async def inherits(ctx: JobContext) -> None: ...

    assert {name: kind.isolation for name, kind in [*queue.kinds.items(), *isolated.kinds.items()]} == {
        "iso.sync": "process",
        "iso.async": "in-process",
        "iso.sync-here": "in-process",
        "iso.async-child": "process",
        "iso.inherits": "process",
    }
    with pytest.raises(ConfigError, match=r"job kind 'iso.bad': isolation must be one of 'process', 'in-process'"):
        queue.job("iso.bad", isolation="thread")(sync)
    with pytest.raises(ConfigError, match=r"queue 'iso-bad': isolation must be one of"):
        Queue("iso-bad", max_workers=1, timeout=5, isolation="fork")


def test_a_sync_job_past_its_timeout_is_killed_and_max_workers_holds(db: Backend, timeline: Timeline) -> None:
    queue = Queue("s", max_workers=2, timeout=1)
    log = _logger(timeline.log)

    @queue.job("iso.sleep", max_attempts=2)
    def sleeper(ctx: JobContext) -> None:
        log("start", ctx)
        time.sleep(60)

    runtime = make_runtime(db, [queue])

    async def main() -> list[Any]:
        async with runtime:
            ids = [await runtime.enqueue("iso.sleep") for _ in range(3)]
            return [await runtime.wait(job_id, timeout=20) for job_id in ids]

    began = time.monotonic()
    statuses = asyncio.run(timeline.sample_while(main()))
    took = time.monotonic() - began
    for status in statuses:
        assert status.state == "failed"
        assert status.error.startswith("TimeoutError: job exceeded its timeout of 1s; its worker process ")
        assert status.error.endswith(" was killed (signal 9 (SIGKILL))")
    runs = list(timeline.runs.values())
    assert len(runs) == 6 and all(run.end is None for run in runs)  # every attempt killed, none returned
    for run in runs:  # each child was gone within its timeout plus a second
        assert run.last_alive - run.start < 1.0 + 1.0, run
    assert timeline.peak() == 2  # both slots were used, never more
    assert took < 3 * (1.0 + 1.0) + 3  # three rounds of two, each killed at about its timeout
    assert (runtime.stats.killed_children, runtime.stats.crashed_children) == (6, 0)
    assert db.state_counts() == {"failed": 3}


def test_per_key_one_holds_across_a_killed_attempt_and_its_retry(db: Backend, timeline: Timeline) -> None:
    queue = Queue("k", max_workers=3, timeout=0.5, per_key=1)
    log = _logger(timeline.log)

    @queue.job("iso.keyed", max_attempts=3)
    def keyed(ctx: JobContext) -> None:
        log("start", ctx)
        time.sleep(60 if ctx.attempt == 1 else 0.1)
        log("end", ctx)

    runtime = make_runtime(db, [queue], key_busy_snooze=0.05)

    async def main() -> list[Any]:
        async with runtime:
            ids = [await runtime.enqueue("iso.keyed", key="hot") for _ in range(3)]
            ids.append(await runtime.enqueue("iso.keyed", key="cold"))
            return [await runtime.wait(job_id, timeout=20) for job_id in ids]

    statuses = asyncio.run(timeline.sample_while(main()))
    assert [status.state for status in statuses] == ["done"] * 4
    assert len(timeline.runs) == 8  # each job: a killed first attempt, then its retry
    assert timeline.peak("hot") == 1  # never two runs of the key at once, killed ones included
    assert timeline.peak() >= 2  # the other key ran beside it
    assert db.scalar("SELECT COUNT(*) AS n FROM corral_key_leases WHERE holder IS NOT NULL") == 0


def test_an_async_job_that_swallows_its_cancellation_is_killed_in_its_child(db: Backend, timeline: Timeline) -> None:
    queue = Queue("a", max_workers=1, timeout=0.5)
    log = _logger(timeline.log)

    @queue.job("iso.stubborn", max_attempts=1, isolation="process")
    async def stubborn(ctx: JobContext) -> None:
        log("start", ctx)
        while True:
            with contextlib.suppress(asyncio.CancelledError):  # the misbehaviour: it never ends
                await asyncio.sleep(0.05)

    @queue.job("iso.blocking", max_attempts=1, isolation="process")
    async def blocking(ctx: JobContext) -> None:
        log("start", ctx)
        time.sleep(60)  # holds its own event loop, not the runtime's

    runtime = make_runtime(db, [queue])

    async def main() -> list[Any]:
        async with runtime:
            ids = [await runtime.enqueue("iso.stubborn"), await runtime.enqueue("iso.blocking")]
            return [await runtime.wait(job_id, timeout=10) for job_id in ids]

    statuses = asyncio.run(timeline.sample_while(main()))
    assert [status.state for status in statuses] == ["failed", "failed"]
    assert all("was killed (signal 9 (SIGKILL))" in (status.error or "") for status in statuses)
    assert all(run.last_alive - run.start < 0.5 + 1.0 for run in timeline.runs.values())
    assert timeline.peak() == 1


def _segfault() -> None:
    ctypes.string_at(0)


@pytest.mark.parametrize(
    ("crash", "status"),
    [
        (lambda: os._exit(1), "exit code 1"),
        (lambda: os.kill(os.getpid(), signal.SIGKILL), "signal 9 (SIGKILL)"),
        (_segfault, "signal 11 (SIGSEGV)"),
    ],
    ids=["exit", "sigkill", "segfault"],
)
def test_a_job_that_crashes_its_worker_fails_only_itself(db: Backend, crash: Any, status: str) -> None:
    queue = Queue("c", max_workers=6, timeout=10)

    @queue.job("iso.crash", max_attempts=10)
    def crasher(ctx: JobContext) -> None:
        time.sleep(0.1)  # its neighbours are under way in their own children
        crash()

    @queue.job("iso.neighbour")
    def neighbour(ctx: JobContext, n: int) -> int:
        time.sleep(0.4)
        return n

    runtime = make_runtime(db, [queue], max_crashes=3)

    async def main() -> tuple[Any, list[Any]]:
        async with runtime:
            crashing = await runtime.enqueue("iso.crash")
            neighbours = [await runtime.enqueue("iso.neighbour", n=n) for n in range(5)]
            crashed = await runtime.wait(crashing, timeout=20)
            return crashed, [await runtime.wait(job_id, timeout=10) for job_id in neighbours]

    crashed, neighbours = asyncio.run(main())
    assert (runtime.stats.killed_children, runtime.stats.crashed_children) == (0, 3)
    assert [(s.state, s.result) for s in neighbours] == [("done", n) for n in range(5)]
    assert crashed.state == "failed"
    assert crashed.error.startswith("the job crashed its worker process 3 times (max_crashes=3); the last one: pid ")
    assert crashed.error.endswith(f"({status})")
    rows = db.rows("SELECT kind, state, attempt, crashes FROM corral_jobs ORDER BY id")
    assert rows[0] == {"kind": "iso.crash", "state": "failed", "attempt": 3, "crashes": 3}  # not all 10 attempts
    assert rows[1:] == [{"kind": "iso.neighbour", "state": "done", "attempt": 1, "crashes": 0}] * 5


def test_an_unstorable_result_from_a_child_fails_only_its_job(db: Backend) -> None:
    queue = Queue("u", max_workers=3, timeout=5)

    @queue.job("iso.nul", max_attempts=1)
    def nul(ctx: JobContext) -> str:
        return "a\x00b"

    @queue.job("iso.fine")
    def fine(ctx: JobContext, n: int) -> dict[str, int]:
        return {"n": n}

    @queue.job("iso.enqueues", max_attempts=1)
    def enqueues(ctx: JobContext) -> None:
        ctx.enqueue("iso.fine", n=1)

    runtime = make_runtime(db, [queue])

    async def main() -> list[Any]:
        async with runtime:
            ids = [await runtime.enqueue("iso.nul"), await runtime.enqueue("iso.enqueues")]
            ids += [await runtime.enqueue("iso.fine", n=n) for n in range(3)]
            return [await runtime.wait(job_id, timeout=10) for job_id in ids]

    bad, enqueuing, *fine_ones = asyncio.run(main())
    assert (bad.state, bad.error) == (
        "failed",
        "the result of job kind 'iso.nul' holds a NUL character (\\u0000) in the string 'a\\x00b'",
    )
    assert enqueuing.state == "failed" and "ctx.enqueue() is not available in a job running isolation='process'" in (
        enqueuing.error or ""
    )
    assert [(s.state, s.result) for s in fine_ones] == [("done", {"n": n}) for n in range(3)]


@pytest.mark.parametrize(
    ("sleeps", "errors"),
    [
        # it replies before its own deadline: the reply fails the attempt (the child says how long it ran)
        (1.3, ["TimeoutError: job ran 1.3s in its worker process, past its timeout of 1s"]),
        # it would sleep 30 s: it ends itself 0.5 s past its timeout, a timeout and not a crash
        (30, ["TimeoutError: job exceeded its timeout of 1s; its worker process", "ended itself 0.5s past it"]),
    ],
    ids=["returns-late", "ends-itself"],
)
def test_a_child_past_its_timeout_while_the_loop_is_held_fails_its_attempt(
    db: Backend, sleeps: float, errors: list[str]
) -> None:
    """Another job holds the event loop for 2.5 s, past the 1 s child's timeout, so nothing here kills the
    child in time."""
    queue = Queue("held", max_workers=2, timeout=1)

    @queue.job("iso.slow", max_attempts=1)
    def slow(ctx: JobContext, seconds: float) -> str:
        time.sleep(seconds)
        return "ran past its timeout"

    @queue.job("iso.holds_the_loop", max_attempts=1)
    async def holds_the_loop(ctx: JobContext) -> None:
        time.sleep(2.5)

    runtime = make_runtime(db, [queue])

    async def main() -> list[Any]:
        async with runtime:
            slow_id = await runtime.enqueue("iso.slow", seconds=sleeps)
            await asyncio.sleep(0.3)  # the child is running when the loop is taken
            held_id = await runtime.enqueue("iso.holds_the_loop")
            return [await runtime.wait(job_id, timeout=15) for job_id in (slow_id, held_id)]

    began = time.monotonic()
    slow_status, held_status = asyncio.run(main())
    assert time.monotonic() - began < 10  # never the child's 30 s
    assert slow_status.state == "failed", slow_status
    for error in errors:
        assert error in (slow_status.error or ""), slow_status
    assert "crashed" not in (slow_status.error or "")
    assert held_status.state == "failed"


def test_a_kind_declared_after_the_pool_started_runs_in_a_fresh_child(db: Backend) -> None:
    queue = Queue("late", max_workers=1, timeout=5)

    @queue.job("iso.early")
    def early(ctx: JobContext) -> int:
        return os.getpid()

    runtime = make_runtime(db, [queue])

    async def main() -> tuple[Any, Any]:
        async with runtime:
            first = await runtime.wait(await runtime.enqueue("iso.early"), timeout=5)

            @queue.job("iso.late")
            def late(ctx: JobContext) -> str:
                return "declared after the child was forked"

            return first, await runtime.wait(await runtime.enqueue("iso.late"), timeout=5)

    first, late = asyncio.run(main())
    assert first.state == "done" and first.result != os.getpid()
    assert (late.state, late.result) == ("done", "declared after the child was forked")


def test_a_spawned_child_imports_the_job_by_module_and_qualname(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> list[dict[str, Any]]:
        pool = ProcessPool(serve=serve_imported, start_method="spawn")
        pool.start(ahead=1)
        try:
            replies = []
            for module, qualname in (("isolationapp", "imported_job"), ("isolationapp", "no_such_job")):
                attempt = pool.submit(
                    {
                        "kind": "k",
                        "module": module,
                        "qualname": qualname,
                        "args": '{"n": 14}',
                        "job_id": 1,
                        "queue": "q",
                        "attempt": 1,
                        "max_attempts": 1,
                        "key": None,
                    }
                )
                replies.append(await asyncio.wait_for(attempt.reply, timeout=30))
                await attempt.finish()
            return replies
        finally:
            pids = pool.pids
            await pool.stop()
            assert not [pid for pid in pids if alive(pid)]

    monkeypatch.syspath_prepend(str(APPS))  # the child imports with the parent's sys.path
    monkeypatch.setenv("CORRAL_TEST_STORE", "memory://")  # isolationapp builds its runtime at import
    imported, missing = asyncio.run(main())
    assert imported["result"] == "42" and 0 <= imported["ran"] < 30  # the child says how long it ran
    assert missing["error"].startswith("job kind 'k': cannot import isolationapp:no_such_job in the worker process")


def _read_starts(log: Path) -> list[tuple[int, int, int]]:
    if not log.exists():
        return []
    return [
        (int(job_id), int(attempt), int(pid))
        for _, job_id, attempt, pid in (line.split() for line in log.read_text().splitlines())
    ]


def _wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_sigterm_kills_the_children_at_grace_and_releases_their_jobs(cli: Any, db: Backend, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    cli.python(
        "import asyncio, isolationapp\n"
        "async def main():\n"
        "    await isolationapp.runtime.start(queues=[])\n"
        "    for _ in range(2):\n"
        "        await isolationapp.runtime.enqueue('slow.sleep', seconds=60)\n"
        "    await isolationapp.runtime.stop()\n"
        "asyncio.run(main())\n"
    )
    worker = cli.start_worker("isolationapp:runtime", "--queues", "slow", "--grace", "2", CORRAL_TEST_LOG=str(log))
    try:
        _wait_for(lambda: len(_read_starts(log)) == 2, 20)
        worker.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert worker.wait(timeout=20) == 0
        took = time.monotonic() - sent
    finally:
        if worker.poll() is None:
            worker.kill()
    assert 2.0 <= took < 2.0 + 1.5  # grace, then SIGKILL of the children and exit
    pids = [pid for _, _, pid in _read_starts(log)]
    assert not [pid for pid in pids if alive(pid)]  # no orphans
    rows = db.rows("SELECT state, attempt FROM corral_jobs")
    assert rows == [{"state": "waiting", "attempt": 0}] * 2  # released: nothing left running, no attempt spent


def test_children_die_with_a_sigkilled_worker_and_the_job_is_rescued(cli: Any, db: Backend, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    cli.python(
        "import asyncio, isolationapp\n"
        "async def main():\n"
        "    await isolationapp.runtime.start(queues=[])\n"
        "    await isolationapp.runtime.enqueue('short.first_attempt_hangs')\n"
        "    await isolationapp.runtime.stop()\n"
        "asyncio.run(main())\n"
    )
    first = cli.start_worker("isolationapp:runtime", "--queues", "short", CORRAL_TEST_LOG=str(log))
    try:
        _wait_for(lambda: len(_read_starts(log)) == 1, 20)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        ((_, _, child),) = _read_starts(log)
        _wait_for(lambda: not alive(child), 3)  # it died with its parent, long before its timeout
    finally:
        if first.poll() is None:
            first.kill()
    second = cli.start_worker("isolationapp:runtime", "--queues", "short", CORRAL_TEST_LOG=str(log))
    try:
        _wait_for(lambda: db.state_counts() == {"done": 1}, 20)  # rescued once its lease expired, then run again
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=10)
    assert [attempt for _, attempt, _ in _read_starts(log)] == [1, 2]
    assert db.rows("SELECT state, attempt FROM corral_jobs") == [{"state": "done", "attempt": 2}]


def test_an_in_process_job_that_takes_its_worker_down_alone_is_failed_after_max_crashes(
    cli: Any, db: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    cli.python(
        "import asyncio, isolationapp\n"
        "async def main():\n"
        "    await isolationapp.runtime.start(queues=[])\n"
        "    await isolationapp.runtime.enqueue('fragile.exit')\n"
        "    await isolationapp.runtime.stop()\n"
        "asyncio.run(main())\n"
    )
    crashed_workers = 0
    while db.state_counts() != {"failed": 1}:
        assert crashed_workers <= 3, "the job was not failed at its third crash"
        worker = cli.start_worker("isolationapp:runtime", "--queues", "fragile", CORRAL_TEST_LOG=str(log))
        try:
            _wait_for(lambda w=worker: w.poll() is not None or db.state_counts() == {"failed": 1}, 30)
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=10) == 0
            elif worker.returncode == 1:
                crashed_workers += 1
    assert crashed_workers == 3
    (row,) = db.rows("SELECT state, attempt, crashes, last_error FROM corral_jobs")
    assert (row["state"], row["attempt"], row["crashes"]) == ("failed", 4, 3)  # the 4th claim failed it unrun
    assert row["last_error"] == (
        "the job crashed its worker process 3 times (max_crashes=3): "
        "each time its worker was lost while running it alone"
    )
    assert len(_read_starts(log)) == 3


def _reply_with_pid(request: dict[str, Any]) -> dict[str, Any]:
    return {"pid": os.getpid(), "echo": request["n"]}


def test_an_idle_child_that_died_is_replaced_without_failing_the_next_request() -> None:
    async def main() -> tuple[int, dict[str, Any], list[int]]:
        pool = ProcessPool(serve=_reply_with_pid, start_method="fork")
        pool.start(ahead=1)
        try:
            (idle,) = pool.pids
            os.kill(idle, signal.SIGKILL)  # dies while idle: the OOM killer, an operator
            # Dead, not dying: on a loaded machine the kill can take longer than any fixed sleep to end
            # it, and a child killed at the very moment of the hand-over is a crash of that request.
            deadline = time.monotonic() + 10
            while os.waitid(os.P_PID, idle, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                assert time.monotonic() < deadline, "the killed child did not end"
                await asyncio.sleep(0.01)
            attempt = pool.submit({"n": 7})
            reply = await asyncio.wait_for(attempt.reply, timeout=10)
            await attempt.finish()
            return idle, reply, pool.pids
        finally:
            pids = pool.pids
            await pool.stop()
            assert not [pid for pid in pids if alive(pid)]

    idle, reply, pids = asyncio.run(main())
    assert reply["echo"] == 7 and reply["pid"] != idle
    assert not alive(idle)  # reaped, not left a zombie
    assert pids == [reply["pid"]]  # the new child is back in the pool


def test_stop_kills_the_attempts_left_at_grace_and_finishes_the_others(db: Backend, timeline: Timeline) -> None:
    queue = Queue("g", max_workers=3, timeout=30)
    log = _logger(timeline.log)

    @queue.job("iso.nap")
    def nap(ctx: JobContext, seconds: float) -> float:
        log("start", ctx)
        time.sleep(seconds)
        log("end", ctx)
        return seconds

    runtime = make_runtime(db, [queue])

    async def main() -> tuple[list[int], float]:
        await runtime.start()
        ids = [await runtime.enqueue("iso.nap", seconds=seconds) for seconds in (0.3, 60, 60)]
        while len(timeline.runs) < 3:
            timeline.read()
            await asyncio.sleep(0.02)
        began = time.monotonic()
        await runtime.stop(grace=1)
        return ids, time.monotonic() - began

    (quick, *slow), took = asyncio.run(main())
    assert 1.0 <= took < 1.0 + 1.5  # grace, then SIGKILL, reap and release
    assert db.job_row(quick)["state"] == "done"  # it finished within grace
    assert [(db.job_row(job_id)["state"], db.job_row(job_id)["attempt"]) for job_id in slow] == [("waiting", 0)] * 2
    # and the timeline fixture checks that no child outlived stop()


def test_a_large_result_crosses_from_the_child_whole(db: Backend) -> None:
    queue = Queue("big", max_workers=1, timeout=20)

    @queue.job("iso.big")
    def big(ctx: JobContext, size: int) -> dict[str, Any]:
        return {"text": "x\n" * size, "n": size}  # many pipe chunks, newlines inside the JSON string

    runtime = make_runtime(db, [queue])

    async def main() -> Any:
        async with runtime:
            return await runtime.wait(await runtime.enqueue("iso.big", size=1_500_000), timeout=20)

    status = asyncio.run(main())
    assert status.state == "done"
    assert status.result["n"] == 1_500_000 and status.result["text"] == "x\n" * 1_500_000
