"""The runtime's parts alone: RuntimeConfig's validation and defaults, the life cycle's transitions, the
completer and the waiters against a stand-in store, and one pass of each maintenance service against a real
store (both stores, through the ``db`` fixture)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import ConfigError, CorralRuntimeError, JobContext, JobStatus, Queue, Runtime
from corral.runtime.completer import Completer, Finished
from corral.runtime.config import RuntimeConfig
from corral.runtime.events import EventHooks
from corral.runtime.lifecycle import Lifecycle, State
from corral.runtime.maintenance import PeriodicScheduler, Pruner, Relay, Rescuer
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores.protocol import DONE, RUNNING, ClaimedJob, Completion, JobState, NewJob, Store
from corral.runtime.waiters import Waiters
from runtime_helpers import Backend

# -- RuntimeConfig ----------------------------------------------------------------------------------


def test_runtime_keywords_are_the_config_fields_with_the_same_defaults() -> None:
    runtime_params = inspect.signature(Runtime).parameters
    fields = {f.name: f for f in dataclasses.fields(RuntimeConfig) if f.init}
    assert set(runtime_params) - {"store"} == set(fields)
    for name, field in fields.items():
        assert runtime_params[name].default == (
            inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        ), name


def test_config_reads_the_declarations_once() -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("first")
    async def first(ctx: JobContext) -> None:
        return None

    config = RuntimeConfig(queues=[queue])

    @queue.job("later")
    async def later(ctx: JobContext) -> None:
        return None

    assert config.queues == (queue,)
    assert list(config.queues_by_name) == ["q"] and list(config.kinds) == ["first"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.grace = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"max_conns": 0}, "max_conns must be an integer >= 1, got 0"),
        ({"max_waiters": True}, "max_waiters must be an integer >= 1, got True"),
        ({"relay_batch": 1.5}, "relay_batch must be an integer >= 1, got 1.5"),
        ({"relay": -1}, "relay must be an integer >= 0, got -1"),
        ({"relay": False}, "relay must be an integer >= 0, got False"),
        ({"grace": -1.0}, "grace must be a finite number of seconds >= 0, got -1.0"),
        ({"hot_poll": float("nan")}, "hot_poll must be a finite number of seconds >= 0, got nan"),
        ({"keep_done": float("inf")}, "keep_done must be a finite number of seconds >= 0, got inf"),
        ({"notify_fallback": -0.5}, "notify_fallback must be a finite number of seconds >= 0, got -0.5"),
        ({"enqueue_timeout": 0}, "enqueue_timeout must be a finite number of seconds > 0, got 0"),
        ({"prune_interval": float("inf")}, "prune_interval must be a finite number of seconds > 0, got inf"),
    ],
)
def test_config_rejects_bad_knobs(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as config_error:
        RuntimeConfig(queues=[], **knobs)
    assert str(config_error.value) == message
    with pytest.raises(ConfigError) as runtime_error:  # before the store is even looked at
        Runtime(queues=[], store="redis://not-looked-at", **knobs)
    assert str(runtime_error.value) == message


def test_config_rejects_bad_queues() -> None:
    with pytest.raises(ConfigError, match="queues must be a sequence of Queue objects"):
        RuntimeConfig(queues=Queue("q", max_workers=1))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="queues must be a sequence of Queue objects"):
        RuntimeConfig(queues=["q"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="queue 'q' is declared twice"):
        RuntimeConfig(queues=[Queue("q", max_workers=1), Queue("q", max_workers=2)])


# -- the life cycle -----------------------------------------------------------------------------------


def test_lifecycle_walks_the_stop_in_order_and_refuses_shortcuts() -> None:
    lifecycle = Lifecycle()
    assert lifecycle.state is State.CREATED and not lifecycle.plumbing
    with pytest.raises(CorralRuntimeError, match="not running"):
        lifecycle.require_running()
    with pytest.raises(CorralRuntimeError, match="cannot go from created to running"):
        lifecycle.enter(State.RUNNING)
    lifecycle.enter(State.STARTING)
    lifecycle.enter(State.CREATED)  # a failed start
    lifecycle.enter(State.STARTING)
    lifecycle.enter(State.RUNNING)
    lifecycle.require_running()
    seen = []
    for state in (State.RUNNING, State.STOPPING, State.DRAINING, State.CANCELLING, State.CLOSING, State.STOPPED):
        if state is not State.RUNNING:
            lifecycle.enter(state)
        seen.append((lifecycle.relaying, lifecycle.claiming, lifecycle.plumbing, lifecycle.hard_stopping))
    assert seen == [
        (True, True, True, False),  # running
        (False, True, True, False),  # stopping: the relay ends first
        (False, False, True, False),  # draining: no more claims
        (False, False, True, True),  # cancelling: the hard stop
        (False, False, False, True),  # closing: plumbing ends
        (False, False, False, True),  # stopped
    ]
    with pytest.raises(CorralRuntimeError, match="cannot go from stopped to starting"):
        lifecycle.enter(State.STARTING)


def test_a_runtime_starts_once_and_stops_once(tmp_path: Path) -> None:
    runtime = Runtime(queues=[Queue("q", max_workers=1)], store=f"sqlite:///{tmp_path / 'jobs.db'}")

    async def main() -> None:
        await runtime.stop()  # not started: nothing to do
        await runtime.start()
        with pytest.raises(CorralRuntimeError, match="already started"):
            await runtime.start()
        await runtime.stop()
        await runtime.stop()
        with pytest.raises(CorralRuntimeError, match="already started"):
            await runtime.start()
        with pytest.raises(CorralRuntimeError, match="not running"):
            await runtime.counts()

    asyncio.run(main())


# -- completer and waiters ----------------------------------------------------------------------------


class _CompletionsStore:
    """Only what the completer and the notifier call: records each batch it is given, and accepts
    the completions of the claims listed in ``current`` (job id -> token), as a store settles only
    the claim it holds."""

    def __init__(self, current: dict[int, int] | None = None) -> None:
        self.batches: list[list[int]] = []
        self.current = current
        self.done: dict[int, str | None] = {}

    async def complete(self, completions: list[Completion]) -> None:
        self.batches.append([done.job_id for done in completions])
        for done in completions:
            if self.current is None or self.current.get(done.job_id) == done.token:
                self.done[done.job_id] = done.result_json

    async def job_states(self, job_ids: list[int]) -> dict[int, JobState]:
        states = {
            job_id: JobState(id=job_id, queue="q", state=RUNNING, result_json=None, error=None) for job_id in job_ids
        }
        for job_id in set(job_ids) & set(self.done):
            states[job_id] = JobState(id=job_id, queue="q", state=DONE, result_json=self.done[job_id], error=None)
        return states


def _finished(completion: Completion) -> Finished:
    """A success of ``completion``'s attempt (a first and last one, of kind ``k`` on queue ``q``) for the completer."""
    claim = ClaimedJob(
        id=completion.job_id,
        queue="q",
        kind="k",
        args_json="{}",
        key=None,
        attempt=1,
        max_attempts=1,
        token=completion.token,
        enqueued_at=0.0,
        run_at=0.0,
    )
    return Finished(completion=completion, job=claim, duration=0.0)


def _complete_and_wait(
    store: _CompletionsStore, job_id: int, completions: list[Completion], stats: RuntimeStats
) -> JobStatus:
    """Submit ``completions``, run the completer and the notifier, and wait (up to 0.5 s) on ``job_id``."""
    waiters = Waiters(store=store, config=RuntimeConfig(queues=[]), lifecycle=_running(), pushed=False)  # type: ignore[arg-type]
    completer = Completer(store=store, stats=stats, waiters=waiters, events=EventHooks(()))  # type: ignore[arg-type]
    waiters.remember(job_id, "q")

    async def main() -> JobStatus:
        notifier = asyncio.ensure_future(waiters.run())
        for completion in completions:
            completer.submit(_finished(completion))
        completer.finish()  # run() stores what is queued, then returns
        status, _ = await asyncio.gather(waiters.wait(job_id, timeout=0.5), completer.run())
        notifier.cancel()
        await asyncio.gather(notifier, return_exceptions=True)
        return status

    return asyncio.run(main())


def test_completer_stores_what_waits_in_one_batch_then_answers_the_waiters() -> None:
    store = _CompletionsStore()
    completions = [Completion(job_id=job_id, token=1, result_json=str(job_id * 10)) for job_id in (1, 2, 3)]
    stats = RuntimeStats()
    assert _complete_and_wait(store, 2, completions, stats) == JobStatus(job_id=2, state="done", waited=True, result=20)
    assert store.batches == [[1, 2, 3]] and stats.completed == 3


def _success(job_id: int) -> Completion:
    return Completion(job_id=job_id, token=1, result_json=None)


def test_completer_batches_what_arrives_while_the_store_is_busy_and_records_it_all_after_finish() -> None:
    store = _CompletionsStore()
    stats = RuntimeStats()
    waiters = Waiters(store=store, config=RuntimeConfig(queues=[]), lifecycle=_running(), pushed=False)  # type: ignore[arg-type]
    completer = Completer(store=store, stats=stats, waiters=waiters, events=EventHooks(()))  # type: ignore[arg-type]
    recorded = store.complete

    async def slow_complete(completions: list[Completion]) -> None:
        await recorded(completions)
        if len(store.batches) == 1:  # while the first batch is stored: two more arrive, then the stop
            completer.submit(_finished(_success(2)))
            completer.submit(_finished(_success(3)))
            completer.finish()
            completer.submit(_finished(_success(4)))  # a straggler after finish() is recorded, never dropped
        await asyncio.sleep(0)

    store.complete = slow_complete  # type: ignore[method-assign]

    async def main() -> None:
        completer.submit(_finished(_success(1)))
        await asyncio.wait_for(completer.run(), 5)

    asyncio.run(main())
    assert store.batches == [[1], [2, 3, 4]] and stats.completed == 4


def test_a_waiter_is_answered_from_what_the_store_accepted_never_from_a_refused_completion() -> None:
    store = _CompletionsStore(current={2: 2})  # job 2 was claimed again: token 1 is a stale attempt
    status = _complete_and_wait(store, 2, [Completion(job_id=2, token=1, result_json="20")], RuntimeStats())
    assert store.batches == [[2]] and status == JobStatus(job_id=2, state="pending", waited=True)


def test_waiters_refuse_beyond_max_waiters_and_answer_unknown_at_stop() -> None:
    config = RuntimeConfig(queues=[], max_waiters=1)
    waiters = Waiters(store=_CompletionsStore(), config=config, lifecycle=_running(), pushed=False)  # type: ignore[arg-type]
    waiters.remember(7, "q")
    waiters.remember(8, "q")

    async def second_then_stop() -> JobStatus:
        refused = await waiters.wait(8, timeout=5)  # queue q already has its one waiter
        waiters.answer_unknown()
        return refused

    async def main() -> tuple[JobStatus, JobStatus]:
        return await asyncio.gather(waiters.wait(7, timeout=5), second_then_stop())

    first, second = asyncio.run(main())
    assert second == JobStatus(job_id=8, state="not-waited", waited=False)
    assert first == JobStatus(job_id=7, state="unknown", waited=True)


# -- maintenance services, one pass against a store ---------------------------------------------------


def _new_job(queue: str, kind: str, *, lease_seconds: float = 5.0, args_json: str = "{}") -> NewJob:
    return NewJob(
        queue=queue,
        kind=kind,
        args_json=args_json,
        key=None,
        run_at=time.time(),
        max_attempts=3,
        lease_seconds=lease_seconds,
    )


def _with_store(db: Backend, queues: list[Queue], body: Callable[[Store], Awaitable[None]]) -> None:
    """Run ``body`` against the test's store, opened and closed around it (no runtime started)."""
    store = Runtime(queues=queues, store=db.url).store

    async def main() -> None:
        await store.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def _running() -> Lifecycle:
    lifecycle = Lifecycle()
    lifecycle.enter(State.STARTING)
    lifecycle.enter(State.RUNNING)
    return lifecycle


async def _nothing_in_flight() -> None:
    """The rescuer's renewal of this process's attempts, for a rescuer tested alone: none run here."""


def test_rescuer_pass_makes_an_expired_claim_retryable(db: Backend) -> None:
    queue = Queue("work", max_workers=1, timeout=5)
    config = RuntimeConfig(queues=[queue])
    stats = RuntimeStats()
    woken: list[str] = []
    job_ids: list[int] = []

    async def body(store: Store) -> None:
        rescuer = Rescuer(
            store=store,
            config=config,
            lifecycle=Lifecycle(),
            stats=stats,
            wake_all=lambda: woken.append("all"),
            renew_in_flight=_nothing_in_flight,
            crash_kinds=list,
            events=EventHooks(()),
        )
        job_ids.extend(await store.enqueue([_new_job("work", "k", lease_seconds=0.3)]))
        assert len(await store.claim("work", 1, "lost-worker")) == 1
        assert await rescuer.run_once() == 0  # the lease still holds
        assert woken == []
        await asyncio.sleep(0.6)
        assert await rescuer.run_once() == 1

    _with_store(db, [queue], body)
    assert stats.rescued == 1 and woken == ["all"]
    row = db.job_row(job_ids[0])
    assert row["state"] == "retrying" and "lost-worker" in row["last_error"]


def test_relay_pass_moves_at_most_a_batch_and_wakes_the_routed_queues(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("answer", on="asked")
    async def answer(ctx: JobContext, n: int) -> int:
        return n + 1

    config = RuntimeConfig(queues=[queue], relay_batch=2)
    stats = RuntimeStats()
    woken: list[str] = []
    moved: list[int] = []

    async def body(store: Store) -> None:
        relay = Relay(store=store, config=config, lifecycle=Lifecycle(), stats=stats, wake=woken.append)
        for n in range(3):
            await store.publish("asked", f'{{"n":{n}}}')
        moved.extend([await relay.run_once(), await relay.run_once(), await relay.run_once()])

    _with_store(db, [queue], body)
    assert moved == [2, 1, 0]
    assert stats.relay_passes == [2, 1] and woken == ["q", "q"]
    assert db.state_counts() == {"waiting": 3}


def test_pruner_pass_deletes_only_old_done_jobs(db: Backend) -> None:
    queue = Queue("q", max_workers=2, timeout=5)
    pruned: list[int] = []

    async def body(store: Store) -> None:
        await store.enqueue([_new_job("q", "k"), _new_job("q", "k")])
        done, _running_job = await store.claim("q", 2, "w")
        await store.complete([Completion(job_id=done.id, token=done.token, result_json=None)])
        keep = Pruner(store=store, config=RuntimeConfig(queues=[queue]), lifecycle=Lifecycle())
        pruned.append(await keep.run_once())  # done a moment ago: kept for keep_done (7 days)
        await asyncio.sleep(0.05)
        prune_all = Pruner(store=store, config=RuntimeConfig(queues=[queue], keep_done=0.0), lifecycle=Lifecycle())
        pruned.append(await prune_all.run_once())

    _with_store(db, [queue], body)
    assert pruned == [0, 1]
    assert db.state_counts() == {"running": 1}


def test_periodic_pass_enqueues_a_due_kind_once(db: Backend) -> None:
    queue = Queue("maintenance", max_workers=1, timeout=5)

    @queue.periodic("tick", every=3600, run_on_start=True)
    async def tick(ctx: JobContext) -> None:
        return None

    config = RuntimeConfig(queues=[queue])
    woken: list[str] = []
    passes: list[int] = []

    async def body(store: Store) -> None:
        scheduler = PeriodicScheduler(store=store, config=config, lifecycle=Lifecycle(), wake=woken.append)
        assert [spec.kind for spec in scheduler.specs] == ["tick"]
        passes.extend([len(await scheduler.run_once()), len(await scheduler.run_once())])

    _with_store(db, [queue], body)
    assert passes == [1, 0]  # the next one is due in an hour
    assert woken == ["maintenance"]


class _CountingStore:
    """Only what the rescuer's and the pruner's loops call; ends the loops (through the life cycle) after
    ``passes`` calls of either kind, and fails the second call of each kind."""

    def __init__(self, lifecycle: Lifecycle, passes: int) -> None:
        self.lifecycle = lifecycle
        self.passes = passes
        self.rescues = 0
        self.prunes: list[float] = []  # when each prune pass ran (monotonic)

    def _count(self, calls: int) -> None:
        if calls == self.passes:
            for state in (State.STOPPING, State.DRAINING, State.CLOSING):
                self.lifecycle.enter(state)
        if calls == 2:
            raise OSError("store away")  # logged; the loop carries on

    async def rescue_expired(self, *, crash_kinds: Sequence[str] = ()) -> int:
        self.rescues += 1
        self._count(self.rescues)
        return 0

    async def prune_done(self, *, older_than: float) -> int:
        self.prunes.append(time.monotonic())
        self._count(len(self.prunes))
        return 0


def test_rescuer_loop_rescues_every_interval_and_never_prunes() -> None:
    lifecycle = _running()
    store = _CountingStore(lifecycle, 250)
    config = RuntimeConfig(queues=[], rescue_interval=0.0)
    rescuer = Rescuer(
        store=store,  # type: ignore[arg-type]
        config=config,
        lifecycle=lifecycle,
        stats=RuntimeStats(),
        wake_all=lambda: None,
        renew_in_flight=_nothing_in_flight,
        crash_kinds=list,
        events=EventHooks(()),
    )
    asyncio.run(asyncio.wait_for(rescuer.run(), 30))
    assert store.rescues == 250
    assert store.prunes == []


def test_pruner_loop_runs_at_once_then_every_prune_interval() -> None:
    lifecycle = _running()
    store = _CountingStore(lifecycle, 4)
    config = RuntimeConfig(queues=[], prune_interval=0.1, rescue_interval=3600.0)
    pruner = Pruner(store=store, config=config, lifecycle=lifecycle)  # type: ignore[arg-type]
    started = time.monotonic()
    asyncio.run(asyncio.wait_for(pruner.run(), 30))
    assert len(store.prunes) == 4  # the failed second pass did not end the loop
    assert store.prunes[0] - started < 0.05
    gaps = [later - earlier for earlier, later in zip(store.prunes, store.prunes[1:], strict=False)]
    assert all(0.09 <= gap < 1.0 for gap in gaps), gaps
    assert store.rescues == 0
