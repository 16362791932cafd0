"""Workers: per-queue limits, isolation between queues, hard timeouts, failures, retries and keys."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import JobContext, JobRequest, Queue, Runtime
from corral.runtime.executor import retry_delay
from corral.runtime.stores.sqlite import SqliteStore
from runtime_helpers import Backend, make_runtime


def test_async_and_sync_jobs_return_json_results(db: Backend) -> None:
    queue = Queue("q", max_workers=2, timeout=5)

    @queue.job("double")
    async def double(ctx: JobContext, n: int) -> dict[str, int]:
        return {"n": n * 2, "attempt": ctx.attempt}

    @queue.job("sync.upper", isolation="in-process")
    def upper(ctx: JobContext, text: str) -> str:
        assert threading.current_thread() is not threading.main_thread()
        return text.upper()

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            a = await runtime.enqueue("double", n=21)
            b = await runtime.enqueue("sync.upper", text="hi")
            sa, sb = await runtime.wait(a, timeout=5), await runtime.wait(b, timeout=5)
            assert (sa.state, sa.result) == ("done", {"n": 42, "attempt": 1})
            assert (sb.state, sb.result) == ("done", "HI")

    asyncio.run(main())


def test_max_workers_bounds_concurrency(db: Backend) -> None:
    queue = Queue("q", max_workers=3, timeout=5)
    sync_queue = Queue("s", max_workers=2, timeout=5)
    peak = {"q": 0, "s": 0}
    current = {"q": 0, "s": 0}
    lock = threading.Lock()

    def enter(name: str) -> None:
        with lock:
            current[name] += 1
            peak[name] = max(peak[name], current[name])

    def leave(name: str) -> None:
        with lock:
            current[name] -= 1

    @queue.job("slow")
    async def slow(ctx: JobContext) -> None:
        enter("q")
        await asyncio.sleep(0.05)
        leave("q")

    @sync_queue.job("slow.sync", isolation="in-process")
    def slow_sync(ctx: JobContext) -> None:
        enter("s")
        time.sleep(0.05)
        leave("s")

    runtime = make_runtime(db, [queue, sync_queue])

    async def main() -> None:
        async with runtime:
            ids = [await runtime.enqueue("slow") for _ in range(15)]
            ids += [await runtime.enqueue("slow.sync") for _ in range(8)]
            for job_id in ids:
                assert (await runtime.wait(job_id, timeout=10)).state == "done"

    asyncio.run(main())
    assert peak == {"q": 3, "s": 2}


def test_hanging_queue_cannot_delay_another(db: Backend) -> None:
    webhook = Queue("webhook", max_workers=8, timeout=30, per_key=1)
    index = Queue("index", max_workers=4, timeout=30)
    release = asyncio.Event()

    @webhook.job("webhook.deliver")
    async def deliver(ctx: JobContext, endpoint: int) -> None:
        await release.wait()

    @index.job("corpus.index")
    async def corpus_index(ctx: JobContext, note_id: int) -> int:
        return note_id

    runtime = make_runtime(db, [webhook, index], grace=0.2)

    async def main() -> None:
        async with runtime:
            for endpoint in range(40):  # 8 running and hanging, 32 more waiting behind them
                await runtime.enqueue("webhook.deliver", endpoint=endpoint, key=f"ep-{endpoint}")
            await asyncio.sleep(0.2)
            started = time.monotonic()
            ids = [await runtime.enqueue("corpus.index", note_id=n) for n in range(20)]
            for job_id in ids:
                assert (await runtime.wait(job_id, timeout=2)).state == "done"
            # The hanging jobs time out only after 30 s; 1.5 s leaves room for a loaded machine.
            assert time.monotonic() - started < 1.5
            counts = await runtime.counts()
            assert counts["webhook"].running == 8

    asyncio.run(main())


def test_async_timeout_is_a_retryable_failure_then_final(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=0.1)
    attempts: list[int] = []

    @queue.job("hangs", max_attempts=3)
    async def hangs(ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        await asyncio.sleep(10)

    runtime = make_runtime(db, [queue])

    async def main() -> int:
        async with runtime:
            job_id = await runtime.enqueue("hangs")
            status = await runtime.wait(job_id, timeout=5)
            assert status.state == "failed"
            assert status.error == "TimeoutError: job exceeded its timeout of 0.1s"
            return job_id

    job_id = asyncio.run(main())
    assert attempts == [1, 2, 3]
    row = db.job_row(job_id)
    assert (row["state"], row["attempt"]) == ("failed", 3)


def test_sync_timeout_is_recorded_and_slot_held_until_thread_returns(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=0.2)
    started: dict[str, float] = {}
    saw_stop = threading.Event()

    @queue.job("sync.slow", max_attempts=1, isolation="in-process")
    def sync_slow(ctx: JobContext) -> None:
        started["slow"] = time.monotonic()
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:  # ignores the timeout on purpose, but notices it
            if ctx.stop_requested:
                saw_stop.set()
            time.sleep(0.01)

    @queue.job("after")
    async def after(ctx: JobContext) -> None:
        started["after"] = time.monotonic()

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            slow = await runtime.enqueue("sync.slow")
            await asyncio.sleep(0.05)
            nxt = await runtime.enqueue("after")
            status = await runtime.wait(slow, timeout=2)
            recorded = time.monotonic()
            assert status.state == "failed" and "timeout of 0.2s" in (status.error or "")
            assert recorded - started["slow"] < 0.6  # recorded at the timeout, not when the thread ended
            assert (await runtime.wait(nxt, timeout=3)).state == "done"

    asyncio.run(main())
    assert saw_stop.is_set()
    assert started["after"] - started["slow"] >= 0.75  # the slot stayed taken until the thread returned


@pytest.mark.parametrize("exc", [ValueError("bad value"), KeyboardInterrupt(), SystemExit(3), GeneratorExit()])
def test_job_exceptions_are_recorded_and_never_fatal(db: Backend, exc: BaseException) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("raises", max_attempts=1)
    async def raises(ctx: JobContext) -> None:
        raise exc

    @queue.job("raises.sync", max_attempts=1)
    def raises_sync(ctx: JobContext) -> None:
        raise exc

    @queue.job("fine")
    async def fine(ctx: JobContext) -> str:
        return "ok"

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            bad = await runtime.enqueue("raises")
            bad_sync = await runtime.enqueue("raises.sync")
            good = await runtime.enqueue("fine")
            for job_id in (bad, bad_sync):
                status = await runtime.wait(job_id, timeout=3)
                assert status.state == "failed"
                assert (status.error or "").startswith(type(exc).__name__)
                assert type(exc).__name__ in db.job_row(job_id)["last_traceback"]
            assert (await runtime.wait(good, timeout=3)).result == "ok"
            failed = await runtime.failed_jobs()
            assert {f.id for f in failed} == {bad, bad_sync}

    asyncio.run(main())


def test_retries_until_success_then_result(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("flaky", max_attempts=5)
    async def flaky(ctx: JobContext) -> int:
        if ctx.attempt < 3:
            raise RuntimeError(f"attempt {ctx.attempt} fails")
        return ctx.attempt

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("flaky")
            status = await runtime.wait(job_id, timeout=5)
            assert (status.state, status.result) == ("done", 3)

    asyncio.run(main())


def test_retry_delay_is_exponential_with_bounded_jitter() -> None:
    rng = random.Random(7)
    for attempt in range(1, 12):
        step = min(60.0, 1.0 * 2 ** (attempt - 1))
        delays = [retry_delay(attempt, base=1.0, cap=60.0, rng=rng) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in delays)
        assert len(set(delays)) > 150  # jittered
    assert retry_delay(50, base=1.0, cap=60.0) <= 60.0


def test_per_key_one_in_flight_across_runtimes(db: Backend) -> None:
    """Two runtimes with their own connections share one file, like two processes."""
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}
    attempts: list[int] = []

    def declare() -> Queue:
        webhook = Queue("webhook", max_workers=4, timeout=5, per_key=1, poll=0.05)

        @webhook.job("webhook.deliver")
        async def deliver(ctx: JobContext, n: int) -> None:
            key = ctx.key or ""
            in_flight[key] = in_flight.get(key, 0) + 1
            peak[key] = max(peak.get(key, 0), in_flight[key])
            attempts.append(ctx.attempt)
            await asyncio.sleep(0.03)
            in_flight[key] -= 1

        return webhook

    first = make_runtime(db, [declare()], key_busy_snooze=0.05)
    second = make_runtime(db, [declare()], key_busy_snooze=0.05)

    async def main() -> None:
        async with first, second:
            ids = [await first.enqueue("webhook.deliver", n=n, key=f"ep-{n % 2}") for n in range(12)]
            for job_id in ids:
                assert (await first.wait(job_id, timeout=10)).state == "done"
        # Both claim loops raced for the keys, yet no job was claimed only to find its key busy: the
        # claim takes the slot with the job.
        assert first.stats.snoozed + second.stats.snoozed == 0

    asyncio.run(main())
    assert peak == {"ep-0": 1, "ep-1": 1}
    assert set(attempts) == {1}  # snoozing never spent an attempt


def test_a_hot_keys_backlog_drains_one_at_a_time_without_snoozing(db: Backend) -> None:
    """60 jobs on one key, per_key=1, 8 workers: from the log of start and end times no two ever
    overlap, and the backlog drains about as fast as back to back. Before claims took the key's slot,
    each claim of eight ran one job and snoozed seven for 2 s: this took minutes."""
    queue = Queue("webhook", max_workers=8, timeout=5, per_key=1)
    log: list[tuple[float, float]] = []

    @queue.job("webhook.deliver")
    async def deliver(ctx: JobContext) -> int:
        started = time.monotonic()
        await asyncio.sleep(0.005)
        log.append((started, time.monotonic()))
        return ctx.attempt

    runtime = make_runtime(db, [queue])  # the default key_busy_snooze: 2 s

    async def main() -> float:
        async with runtime:
            ids = [await runtime.enqueue("webhook.deliver", key="hot") for _ in range(60)]
            began = time.monotonic()
            results = [await runtime.wait(job_id, timeout=30) for job_id in ids]
            elapsed = time.monotonic() - began
        assert [(status.state, status.result) for status in results] == [("done", 1)] * 60
        assert runtime.stats.snoozed == 0
        return elapsed

    elapsed = asyncio.run(main())
    log.sort()
    assert len(log) == 60
    for (_, previous_end), (start, _) in itertools.pairwise(log):
        assert start >= previous_end  # never two jobs of the key at once
    assert elapsed < 2.0, f"60 jobs of 5 ms on one key took {elapsed:.2f} s"


def test_a_hot_key_does_not_hold_up_other_keys_or_jobs_without_one(db: Backend) -> None:
    queue = Queue("webhook", max_workers=4, timeout=5, per_key=1)
    finished: dict[str, float] = {}

    @queue.job("webhook.deliver")
    async def deliver(ctx: JobContext, name: str) -> None:
        await asyncio.sleep(0.02)
        finished[name] = time.monotonic()

    feeder = make_runtime(db, [queue])
    runtime = make_runtime(db, [queue])

    async def main() -> None:
        # The whole backlog is there before the first claim: the two others sit behind the hot key's 40.
        await feeder.start(queues=[])
        hot = [await feeder.enqueue("webhook.deliver", name=f"hot-{n}", key="hot") for n in range(40)]
        cold = await feeder.enqueue("webhook.deliver", name="cold", key="cold")
        plain = await feeder.enqueue("webhook.deliver", name="plain")
        await feeder.stop()
        async with runtime:
            for job_id in [cold, plain, *hot]:
                assert (await runtime.wait(job_id, timeout=30)).state == "done"

    asyncio.run(main())
    # The two others ran beside the hot key's first jobs, not after its backlog of 40 x 20 ms.
    assert finished["cold"] < finished["hot-5"] and finished["plain"] < finished["hot-5"]


def test_a_freed_key_slot_wakes_the_claim_loop_long_before_its_poll(db: Backend) -> None:
    """The key is held by a lease the runtime's claims pass over; freeing it starts the waiting job at
    once: through this runtime's store (a slot freed here wakes its own loops), and on PostgreSQL also
    through another store object, as another process would (its NOTIFY)."""
    queue = Queue("webhook", max_workers=2, timeout=5, per_key=1, poll=5.0)
    started: list[float] = []

    @queue.job("webhook.deliver")
    async def deliver(ctx: JobContext) -> None:
        started.append(time.monotonic())

    runtime = make_runtime(db, [queue])
    other = make_runtime(db, [])  # its own store: another process, for this purpose

    async def main() -> None:
        async with runtime, other:
            releasers = [runtime] + ([other] if db.kind == "postgresql" else [])
            for releaser in releasers:
                # The previous job's attempt frees its slot once its task has ended, just after its outcome.
                deadline = time.monotonic() + 2
                while not await runtime.store.acquire_key_lease("webhook", "ep", holder=999999, limit=1, seconds=60):
                    assert time.monotonic() < deadline, "a finished job's key slot was never released"
                    await asyncio.sleep(0.01)
                job_id = await runtime.enqueue("webhook.deliver", key="ep")
                await asyncio.sleep(0.3)  # claims (woken by the enqueue) pass over it
                assert db.job_row(job_id)["state"] == "waiting"
                freed = time.monotonic()
                await releaser.store.release_key_lease("webhook", "ep", holder=999999)
                assert (await runtime.wait(job_id, timeout=2)).state == "done"
                assert started[-1] - freed < 1.0  # the poll is 5 s
            assert runtime.stats.snoozed == 0

    asyncio.run(main())


def test_per_key_n_allows_n(db: Backend) -> None:
    queue = Queue("q", max_workers=6, timeout=5, per_key=2)
    in_flight = 0
    peak = 0

    @queue.job("keyed")
    async def keyed(ctx: JobContext) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1

    runtime = make_runtime(db, [queue], key_busy_snooze=0.02)

    async def main() -> None:
        async with runtime:
            ids = [await runtime.enqueue("keyed", key="same") for _ in range(8)]
            for job_id in ids:
                assert (await runtime.wait(job_id, timeout=10)).state == "done"

    asyncio.run(main())
    assert peak == 2


def test_crashed_holders_key_lease_expires_by_itself(db: Backend) -> None:
    queue = Queue("webhook", max_workers=2, timeout=5, per_key=1)

    @queue.job("deliver")
    async def deliver(ctx: JobContext) -> float:
        return time.time()

    runtime = make_runtime(db, [queue], key_busy_snooze=0.05)

    async def main() -> None:
        async with runtime:
            # a lease left behind by a worker that died: holder 999999, expiring in 0.4 s. The clock is read
            # before the lease is taken: its expiry counts from a moment after this one.
            taken = time.time()
            assert await runtime.store.acquire_key_lease("webhook", "ep", holder=999999, limit=1, seconds=0.4)
            job_id = await runtime.enqueue("deliver", key="ep")
            status = await runtime.wait(job_id, timeout=5)
            assert status.state == "done"
            assert status.result >= taken + 0.4
            assert runtime.stats.snoozed == 0  # skipped by the claims while the key was held, never snoozed

    asyncio.run(main())


def test_a_busy_queue_records_its_completions_on_its_next_claims(tmp_path: Path) -> None:
    """The claim loop's next claim carries the completions of the jobs before it (one transaction for
    both); every job is recorded done once, whichever way its completion went."""
    recorded = Counter[str]()

    class CountingStore(SqliteStore):
        async def claim(self, queue: str, limit: int, worker_id: str, **options: Any) -> Any:
            recorded["on claims"] += len(options.get("completions", ()))
            return await super().claim(queue, limit, worker_id, **options)

        async def complete(self, completions: Any) -> None:
            recorded["alone"] += len(completions)
            await super().complete(completions)

    queue = Queue("q", max_workers=4, timeout=5)

    @queue.job("quick")
    async def quick(ctx: JobContext, n: int) -> int:
        return n

    async def main() -> None:
        runtime = Runtime(queues=[queue], store=CountingStore(path=tmp_path / "jobs.db"))
        await runtime.start(queues=[])
        ids = [await runtime.enqueue("quick", n=n) for n in range(40)]
        await runtime.stop()
        worker = Runtime(queues=[queue], store=CountingStore(path=tmp_path / "jobs.db"))
        async with worker:
            for job_id in ids:
                assert (await worker.wait(job_id, timeout=10)).state == "done"

    asyncio.run(main())
    assert recorded["on claims"] > 0 and recorded["on claims"] + recorded["alone"] == 40


def test_wait_on_a_job_done_after_a_failure_reports_its_result_and_no_error(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)
    calls: list[int] = []

    @queue.job("flaky", max_attempts=3)
    async def flaky(ctx: JobContext) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("boom 1")
        return "second time"

    async def main() -> None:
        async with make_runtime(db, [queue]) as runtime:
            status = await runtime.wait(await runtime.enqueue("flaky"), timeout=10)
            assert (status.state, status.result, status.error) == ("done", "second time", None)

    asyncio.run(main())


def _lease_left(db: Backend, job_id: int) -> float:
    """Seconds until the lease of job ``job_id`` ends (negative: it has lapsed), read as the store holds it."""
    if db.kind == "sqlite":
        return float(db.scalar(f"SELECT lease_until FROM corral_jobs WHERE id = {job_id}")) - time.time()
    return float(db.scalar(f"SELECT extract(epoch FROM lease_until - now()) FROM corral_jobs WHERE id = {job_id}"))


def test_jobs_claimed_while_another_job_holds_the_loop_keep_their_leases(db: Backend) -> None:
    # One claim takes both jobs; the first blocks the loop for 3 s, past the 2 s lease (timeout 1 + 1) of the
    # second, whose task has not begun. The loop watchdog renews the leases of every attempt claimed here, so
    # at the end of the stall the second's lease still runs (another process would otherwise rescue it and run
    # it beside this one), and the sync job's thread, which ran past its own timeout meanwhile, is failed.
    queue = Queue("q", max_workers=3, timeout=1, poll=0.05)
    left: list[float] = []

    @queue.job("hold", max_attempts=1)
    async def hold(ctx: JobContext, waiting: int) -> None:
        time.sleep(3)  # the misbehaviour under test: a blocking call in async code
        left.append(_lease_left(db, waiting))

    @queue.job("after")
    async def after(ctx: JobContext) -> int:
        return ctx.attempt

    @queue.job("sync.slow", isolation="in-process", max_attempts=1)
    def slow(ctx: JobContext) -> str:
        time.sleep(1.5)  # past its 1 s timeout, while the loop is held: no timer can stop it
        return "done"

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            # One batch, due together in 0.3 s: one claim takes all three, in priority order.
            (waiting,) = await runtime.enqueue_many([JobRequest("after", delay=0.3, priority=0)])
            thread, held = await runtime.enqueue_many(
                [
                    JobRequest("sync.slow", delay=0.3 - 0.001, priority=3),
                    JobRequest("hold", waiting=int(waiting), delay=0.3 - 0.001, priority=2),
                ]
            )
            states = [await runtime.wait(job, timeout=15) for job in (waiting, thread, held)]
            assert [(state.state, state.result) for state in states] == [
                ("done", 1),
                ("failed", None),
                ("failed", None),
            ]
            assert db.job_row(thread)["last_error"] == "TimeoutError: job ran 1.5s, past its timeout of 1s"

    asyncio.run(main())
    assert len(left) == 1 and left[0] > 0, left  # the waiting job's lease outlived the 3 s stall


def test_a_claim_answered_only_after_the_loop_was_held_is_put_back_unrun(db: Backend) -> None:
    # The claim's answer waits while job code holds the loop (here: the claim itself, once), for half the
    # job's 2 s lease: its leases may have lapsed meanwhile and another process may hold the job or its key
    # now, so it is put back unrun (attempt refunded) and claimed afresh.
    queue = Queue("q", max_workers=2, timeout=1, poll=0.05)
    runs: list[int] = []

    @queue.job("once")
    async def once(ctx: JobContext) -> int:
        runs.append(ctx.attempt)
        return ctx.attempt

    runtime = make_runtime(db, [queue])

    async def main() -> int:
        async with runtime:
            real = runtime.store.claim
            held: list[bool] = []

            async def claim_then_hold(*args: Any, **kwargs: Any) -> Any:
                claimed = await real(*args, **kwargs)
                if claimed and not held:
                    held.append(True)
                    time.sleep(1.0)  # the misbehaviour: code holding the loop while the answer waits
                return claimed

            runtime.store.claim = claim_then_hold  # type: ignore[method-assign]
            job = await runtime.enqueue("once")
            state = await runtime.wait(job, timeout=10)
            assert (state.state, state.result) == ("done", 1)
            return int(job)

    job = asyncio.run(main())
    assert runs == [1]
    assert db.job_row(job)["claims"] == 2  # claimed, put back unrun, claimed again
