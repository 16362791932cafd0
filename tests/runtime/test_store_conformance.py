"""The Store protocol's conformance suite: one set of tests every store must pass, called through the protocol.

Each test runs on a fresh SQLite file, on a fresh schema of the throwaway PostgreSQL server and on
the in-memory store. What the runtime tests check through a Runtime, this checks store call by
store call: claim order and limits, tokens that refuse stale settlements, leases and their rescue,
key leases, the relay, periodic scheduling, inspection and pruning. Times are real (PostgreSQL
uses the server's clock), so the waits past a lease or a period are short and generous.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from corral.runtime import ConfigError
from corral.runtime.infra import run_in_thread
from corral.runtime.payloads import UnstorableJson
from corral.runtime.stores import SCHEMES
from corral.runtime.stores.memory import MemoryStore
from corral.runtime.stores.postgres import PostgresStore
from corral.runtime.stores.protocol import (
    UNIQUE_ALWAYS,
    Completion,
    HeldLease,
    JobFilter,
    NewJob,
    PeriodicSpec,
    QueueCounts,
    RelayPass,
    Route,
    Store,
    attempt_holder,
    rescue_error,
)
from corral.runtime.stores.sqlite import SqliteStore

StoreFactory = Callable[[], Store]
Scenario = Callable[[Store], Awaitable[None]]

# A lease or a period that the test then waits out. It must also outlast the few statements a test runs
# while it is still held: 50 ms did not, on a loaded CI machine with four xdist workers on two cores.
SHORT = 0.25
PAST_SHORT = 0.75  # comfortably past SHORT, even on a loaded machine


# The token of a job's first claim: a key slot's holder is the attempt (attempt_holder), not the job.
FIRST_CLAIM = 1

# Every store the scheme registry knows, by its scheme's name (test_every_scheme_is_in_the_suite holds
# the registry and this list together).
CONFORMANCE_STORES = ["sqlite", "postgres", "memory"]


def test_every_scheme_is_in_the_suite() -> None:
    assert sorted(scheme.name for scheme in SCHEMES) == sorted(CONFORMANCE_STORES)


@pytest.fixture(params=CONFORMANCE_STORES)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """How to build the store under test (inside the test's event loop: a pool belongs to its loop)."""
    if request.param == "sqlite":
        return lambda: SqliteStore(path=tmp_path / "jobs.db")
    if request.param == "postgres":
        url = request.getfixturevalue("pg").url
        return lambda: PostgresStore(url, max_size=4, min_size=1)
    return MemoryStore


def drive(make_store: StoreFactory, scenario: Scenario) -> None:
    async def main() -> None:
        store = make_store()
        await store.migrate()
        await store.open()
        try:
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


def new_job(
    queue: str = "q",
    *,
    kind: str = "k",
    args: object = None,
    key: str | None = None,
    delay: float = 0.0,
    max_attempts: int = 3,
    lease_seconds: float = 30.0,
    priority: int = 0,
    unique: str | None = None,
    unique_states: tuple[str, ...] = UNIQUE_ALWAYS,
) -> NewJob:
    return NewJob(
        queue=queue,
        kind=kind,
        args_json=json.dumps({} if args is None else args),
        key=key,
        run_at=time.time() + delay,
        max_attempts=max_attempts,
        lease_seconds=lease_seconds,
        priority=priority,
        unique_key=unique,
        unique_states=unique_states,
    )


async def state_of(store: Store, job_id: int) -> str:
    return (await store.job_states([job_id]))[job_id].state


# -- enqueue and claim ----------------------------------------------------------------------------


def test_enqueue_returns_ids_in_order_and_claim_takes_the_oldest_run_at_first(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.enqueue([]) == []
        ids = await store.enqueue(
            [new_job(args={"n": 0}, delay=-1), new_job(args={"n": 1}, delay=-3, key="a"), new_job(delay=-2)]
        )
        assert ids == sorted(ids) and len(set(ids)) == 3
        (later,) = await store.enqueue([new_job(delay=-2)])
        assert later > ids[-1]
        assert await store.claim("q", 0, "w") == []
        first = await store.claim("q", 2, "w")
        assert [job.id for job in first] == [ids[1], ids[2]]  # by run_at, then id
        job = first[0]
        assert (job.queue, job.kind, job.key, job.attempt, job.max_attempts) == ("q", "k", "a", 1, 3)
        assert json.loads(job.args_json) == {"n": 1}
        assert job.run_at < job.enqueued_at
        rest = await store.claim("q", 10, "w")
        assert [job.id for job in rest] == [later, ids[0]]
        assert await store.claim("q", 10, "w") == []
        assert (await store.counts())["q"] == QueueCounts(running=4)

    drive(make_store, scenario)


def test_claim_sees_only_its_queue_and_jobs_already_due(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (due, other, future) = await store.enqueue([new_job(), new_job("other"), new_job(delay=60)])
        assert [job.id for job in await store.claim("q", 10, "w")] == [due]
        assert await store.claim("q", 10, "w") == []
        assert [job.id for job in await store.claim("other", 10, "w")] == [other]
        assert await state_of(store, future) == "waiting"

    drive(make_store, scenario)


def test_claims_take_the_highest_priority_first_then_the_oldest_due(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        low_old, high, mid, high_later, high_future = await store.enqueue(
            [
                new_job(priority=0, delay=-10),
                new_job(priority=3, delay=-1),
                new_job(priority=1, delay=-5),
                new_job(priority=3, delay=-0.5),
                new_job(priority=3, delay=60),  # not due: it takes nobody's place
            ]
        )
        first = await store.claim("q", 2, "w")
        assert [(job.id, job.priority) for job in first] == [(high, 3), (high_later, 3)]
        assert [job.id for job in await store.claim("q", 10, "w")] == [mid, low_old]
        assert await state_of(store, high_future) == "waiting"
        # A retry keeps its priority: it goes ahead of the lower ones again.
        (plain,) = await store.enqueue([new_job(priority=0, delay=-100)])
        await store.fail(high, first[0].token, error="E", traceback=None, retry_at=time.time() - 1)
        assert [job.id for job in await store.claim("q", 1, "w")] == [high]
        assert [job.id for job in await store.claim("q", 1, "w")] == [plain]

    drive(make_store, scenario)


def test_keyed_claims_take_the_highest_priority_first_within_and_across_keys(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        a_low, a_high, b_mid, plain_low = await store.enqueue(
            [
                new_job(key="a", priority=0, delay=-10),
                new_job(key="a", priority=2, delay=-1),
                new_job(key="b", priority=1, delay=-5),
                new_job(priority=0, delay=-20),
            ]
        )
        claimed = await store.claim("q", 2, "w", per_key=1)
        assert [job.id for job in claimed] == [a_high, b_mid]  # a's slot goes to its higher job
        assert [job.id for job in await store.claim("q", 10, "w", per_key=1)] == [plain_low]
        await store.release_key_lease("q", "a", holder=attempt_holder(a_high, FIRST_CLAIM))
        assert [job.id for job in await store.claim("q", 10, "w", per_key=1)] == [a_low]

    drive(make_store, scenario)


# -- unique jobs ----------------------------------------------------------------------------------


def test_a_unique_key_is_held_while_waiting_running_or_retrying_and_free_once_finished(
    make_store: StoreFactory,
) -> None:
    async def scenario(store: Store) -> None:
        (first,) = await store.enqueue([new_job(unique="u", args={"n": 1})])
        assert not first.duplicate
        (again,) = await store.enqueue([new_job(unique="u", args={"n": 2})])
        assert (again, again.duplicate) == (first, True)
        # In one batch: a held key, a new key twice, a job without a key.
        held, new, new_twice, plain = await store.enqueue(
            [new_job(unique="u"), new_job(unique="v"), new_job(unique="v"), new_job()]
        )
        assert (held, held.duplicate) == (first, True)
        assert not new.duplicate and not plain.duplicate and new != plain
        assert (new_twice, new_twice.duplicate) == (new, True)
        assert (await store.counts())["q"] == QueueCounts(waiting=3)
        claimed = {job.id: job for job in await store.claim("q", 10, "w")}
        assert (await store.enqueue([new_job(unique="u")]))[0].duplicate  # running
        await store.fail(first, claimed[first].token, error="E", traceback=None, retry_at=time.time() + 60)
        assert (await store.enqueue([new_job(unique="u")]))[0].duplicate  # retrying
        await store.complete([Completion(new, claimed[new].token, None)])
        (after_done,) = await store.enqueue([new_job(unique="v")])
        assert not after_done.duplicate and after_done != new  # done: the key is free again
        (other_queue,) = await store.enqueue([new_job("other", unique="w")])
        assert (await store.enqueue([new_job(unique="w")]))[0] == other_queue  # a key is not per queue
        assert (await store.counts())["q"].waiting == 1

    drive(make_store, scenario)


def test_jobs_without_a_unique_key_are_each_inserted_beside_a_held_key(make_store: StoreFactory) -> None:
    # The stores insert a batch without unique keys by a statement of its own (no unique columns): its jobs
    # are never answered as duplicates, whatever they share with a key's holder; a unique job still is.
    async def scenario(store: Store) -> None:
        (holder,) = await store.enqueue([new_job(unique="u", args={"n": 1})])
        plain = await store.enqueue([new_job(args={"n": 1}, priority=2, key="a") for _ in range(3)])
        (alone,) = await store.enqueue([new_job(args={"n": 1})])
        assert not any(answer.duplicate for answer in [*plain, alone])
        assert len({holder, *plain, alone}) == 5 and plain == sorted(plain) and alone > plain[-1]
        (again,) = await store.enqueue([new_job(unique="u", args={"n": 1})])
        assert (again, again.duplicate) == (holder, True)
        claimed = await store.claim("q", 10, "w")
        assert [(job.id, job.priority, job.key) for job in claimed[:3]] == [(job_id, 2, "a") for job_id in plain]
        assert (await store.counts())["q"] == QueueCounts(running=5)

    drive(make_store, scenario)


def test_unique_states_can_hold_the_key_in_final_states_too(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        with_done = (*UNIQUE_ALWAYS, "done")
        with_failed = (*UNIQUE_ALWAYS, "failed")
        done, failed = await store.enqueue(
            [new_job(unique="d", unique_states=with_done), new_job(unique="f", unique_states=with_failed)]
        )
        claimed = {job.id: job for job in await store.claim("q", 10, "w")}
        await store.complete([Completion(done, claimed[done].token, None)])
        await store.fail(failed, claimed[failed].token, error="E", traceback=None, retry_at=None)
        assert (await store.enqueue([new_job(unique="d", unique_states=with_done)]))[0] == done
        assert (await store.enqueue([new_job(unique="f", unique_states=with_failed)]))[0] == failed
        # A key is held by the states of the job that has it, not of the one enqueued now.
        (fresh,) = await store.enqueue([new_job(unique="f")])
        assert fresh.duplicate and fresh == failed

    drive(make_store, scenario)


# -- cancelling -----------------------------------------------------------------------------------


def test_cancel_ends_waiting_and_running_jobs_and_their_attempts_cannot_settle_them(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        waiting, running, retrying, done, later = await store.enqueue(
            [new_job(delay=-3), new_job(delay=-2), new_job(delay=-1), new_job(delay=-0.5), new_job(delay=60)]
        )
        claimed = {job.id: job for job in await store.claim("q", 10, "w")}
        assert set(claimed) == {waiting, running, retrying, done}
        await store.fail(retrying, claimed[retrying].token, error="E", traceback=None, retry_at=time.time() + 60)
        await store.complete([Completion(done, claimed[done].token, None)])
        await store.release(waiting, claimed[waiting].token)
        assert await store.cancel([]) == []
        assert await store.cancel([later, running, done, 10**9, retrying, waiting]) == [
            later,
            running,
            retrying,
            waiting,
        ]
        assert await store.cancel([running]) == []  # cancelled is final: once
        states = await store.job_states([waiting, running, retrying, done, later])
        assert {job_id: state.state for job_id, state in states.items()} == {
            waiting: "cancelled",
            running: "cancelled",
            retrying: "cancelled",
            done: "done",
            later: "cancelled",
        }
        assert (await store.counts())["q"] == QueueCounts(done=1, cancelled=4)
        token = claimed[running].token
        # Its attempt ends afterwards: whatever it records, the job stays cancelled and never runs again.
        await store.complete([Completion(running, token, json.dumps("late"))])
        assert not await store.fail(running, token, error="E", traceback=None, retry_at=time.time() - 1)
        await store.snooze(running, token, seconds=0)
        assert not await store.renew(running, token, seconds=60, key=None)
        assert (await store.job_states([running]))[running].result_json is None
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 0
        assert await store.claim("q", 10, "w") == []
        assert await state_of(store, running) == "cancelled"

    drive(make_store, scenario)


def test_a_cancelled_unique_job_frees_its_key(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (first,) = await store.enqueue([new_job(unique="u")])
        assert await store.cancel([first]) == [first]
        (second,) = await store.enqueue([new_job(unique="u")])
        assert not second.duplicate and second != first
        (kept,) = await store.enqueue([new_job(unique="c", unique_states=(*UNIQUE_ALWAYS, "cancelled"))])
        await store.cancel([kept])
        assert (await store.enqueue([new_job(unique="c")]))[0] == kept

    drive(make_store, scenario)


# -- settling a claim -----------------------------------------------------------------------------


def test_complete_records_the_result_once_and_only_for_the_current_token(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        first, second = await store.enqueue([new_job(), new_job()])
        claimed = {job.id: job for job in await store.claim("q", 2, "w")}
        await store.complete([Completion(first, claimed[first].token + 1, json.dumps("stale"))])
        assert await state_of(store, first) == "running"
        await store.complete(
            [
                Completion(first, claimed[first].token, json.dumps({"ok": 1})),
                Completion(second, claimed[second].token, None),
            ]
        )
        await store.complete([Completion(first, claimed[first].token, json.dumps("again"))])  # done stays done
        states = await store.job_states([first, second, 10**9])
        assert set(states) == {first, second}
        assert states[first].state == "done" and json.loads(states[first].result_json or "null") == {"ok": 1}
        assert (states[second].state, states[second].result_json, states[second].queue) == ("done", None, "q")
        await store.complete([])

    drive(make_store, scenario)


def test_a_claim_records_the_completions_riding_on_it(make_store: StoreFactory) -> None:
    """A claim loop's claim carries the completions waiting: recorded as complete() records them (the
    current token only), in the claim's transaction; a claim of nothing still records them."""

    async def scenario(store: Store) -> None:
        first, second, third = await store.enqueue([new_job(), new_job(), new_job()])
        held = {job.id: job for job in await store.claim("q", 2, "w")}
        riding = [
            Completion(first, held[first].token, json.dumps({"ok": 1})),
            Completion(second, held[second].token + 1, json.dumps("stale")),
        ]
        assert [job.id for job in await store.claim("q", 5, "w", completions=riding)] == [third]
        states = await store.job_states([first, second, third])
        assert states[first].state == "done" and json.loads(states[first].result_json or "null") == {"ok": 1}
        assert (states[second].state, states[third].state) == ("running", "running")
        late = [Completion(second, held[second].token, None)]
        assert await store.claim("q", 5, "w", completions=late) == []  # nothing to claim: recorded all the same
        assert await state_of(store, second) == "done"
        assert await store.claim("q", 0, "w", completions=[Completion(third, 1, None)]) == []
        assert await state_of(store, third) == "done"

    drive(make_store, scenario)


def test_a_claim_carrying_a_result_the_store_refuses_records_and_claims_nothing(make_store: StoreFactory) -> None:
    """All or none: the claim and its completions are one transaction (the SQL stores refuse text they
    cannot encode; the in-memory store stores any text)."""

    async def scenario(store: Store) -> None:
        if isinstance(store, MemoryStore):
            pytest.skip("the in-memory store refuses no result")
        first, waiting = await store.enqueue([new_job(), new_job()])
        (held,) = await store.claim("q", 1, "w")
        riding = [Completion(first, held.token, '"a\udc80"')]  # a raw lone surrogate: no driver encodes it
        with pytest.raises(UnstorableJson):
            await store.claim("q", 5, "w", completions=riding)
        assert (await state_of(store, first), await state_of(store, waiting)) == ("running", "waiting")

    drive(make_store, scenario)


def test_fail_retries_at_retry_at_or_fails_for_good(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        retried, final, soon = await store.enqueue([new_job(), new_job(), new_job()])
        claimed = {job.id: job for job in await store.claim("q", 3, "w")}
        assert await store.fail(
            retried, claimed[retried].token, error="E: later", traceback="tb", retry_at=time.time() + 60
        )
        assert await store.fail(final, claimed[final].token, error="E: never", traceback=None, retry_at=None)
        await store.fail(soon, claimed[soon].token, error="E: now", traceback=None, retry_at=time.time() - 1)
        states = await store.job_states([retried, final, soon])
        assert {job_id: (s.state, s.error) for job_id, s in states.items()} == {
            retried: ("retrying", "E: later"),
            final: ("failed", "E: never"),
            soon: ("retrying", "E: now"),
        }
        (again,) = await store.claim("q", 10, "w")  # the retry due now, not the one due in a minute
        assert (again.id, again.attempt) == (soon, 2)
        assert again.token != claimed[soon].token
        (failed,) = await store.failed()
        assert (failed.id, failed.error, failed.traceback, failed.attempt, failed.max_attempts) == (
            final,
            "E: never",
            None,
            1,
            3,
        )
        assert failed.finished_at is not None and abs(failed.finished_at - time.time()) < 30

    drive(make_store, scenario)


def test_stale_tokens_cannot_fail_snooze_release_or_complete(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job()])
        (old,) = await store.claim("q", 1, "w")
        await store.release(job_id, old.token)
        (new,) = await store.claim("q", 1, "w2")
        assert new.token != old.token
        assert not await store.fail(job_id, old.token, error="stale", traceback=None, retry_at=None)
        await store.snooze(job_id, old.token, seconds=60)
        await store.release(job_id, old.token)
        await store.complete([Completion(job_id, old.token, json.dumps("stale"))])
        state = (await store.job_states([job_id]))[job_id]
        assert (state.state, state.error, state.result_json) == ("running", None, None)
        assert await store.claim("q", 1, "w3") == []  # still held by the current claim
        await store.complete([Completion(job_id, new.token, json.dumps("fresh"))])
        state = (await store.job_states([job_id]))[job_id]
        assert (state.state, json.loads(state.result_json or "null")) == ("done", "fresh")
        await store.release(job_id, new.token)  # a settled job is not put back
        assert await state_of(store, job_id) == "done"

    drive(make_store, scenario)


def test_snooze_and_release_refund_the_attempt(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        snoozed, released = await store.enqueue([new_job(), new_job()])
        claimed = {job.id: job for job in await store.claim("q", 2, "w")}
        await store.snooze(snoozed, claimed[snoozed].token, seconds=60)
        await store.release(released, claimed[released].token)
        assert {s.state for s in (await store.job_states([snoozed, released])).values()} == {"waiting"}
        (again,) = await store.claim("q", 10, "w")  # the snoozed job waits its minute
        assert (again.id, again.attempt) == (released, 1)
        (job_id,) = await store.enqueue([new_job()])
        (short,) = await store.claim("q", 1, "w")
        await store.snooze(job_id, short.token, seconds=SHORT)
        assert await store.claim("q", 1, "w") == []
        await asyncio.sleep(PAST_SHORT)
        (woken,) = await store.claim("q", 1, "w")
        assert (woken.id, woken.attempt) == (job_id, 1)

    drive(make_store, scenario)


def test_a_snooze_the_job_asked_for_counts_in_its_retries_and_no_other_does(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job()])
        seen: list[tuple[int, int]] = []
        for retried in (True, False, True):
            (job,) = await store.claim("q", 1, "w")
            seen.append((job.attempt, job.retries))
            await store.snooze(job_id, job.token, seconds=0, retried=retried)
        (job,) = await store.claim("q", 1, "w")
        seen.append((job.attempt, job.retries))
        await store.release(job_id, job.token)
        (job,) = await store.claim("q", 1, "w")
        assert [*seen, (job.attempt, job.retries)] == [(1, 0), (1, 1), (1, 1), (1, 2), (1, 2)]

    drive(make_store, scenario)


# -- leases and rescue ----------------------------------------------------------------------------


def test_rescue_makes_expired_leases_retryable_or_failed(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        retried, out_of_attempts = await store.enqueue(
            [new_job(lease_seconds=SHORT, max_attempts=2), new_job(lease_seconds=SHORT, max_attempts=1)]
        )
        (kept,) = await store.enqueue([new_job(lease_seconds=60)])
        claimed = {job.id: job for job in await store.claim("q", 3, "worker-7")}
        assert await store.rescue_expired() == 0
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 2
        assert await store.rescue_expired() == 0
        states = await store.job_states([retried, out_of_attempts, kept])
        lost = rescue_error("worker-7", 1)
        assert lost == "lease expired: the worker worker-7 was lost while running attempt 1"
        assert {job_id: (s.state, s.error) for job_id, s in states.items()} == {
            retried: ("retrying", lost),
            out_of_attempts: ("failed", lost),
            kept: ("running", None),
        }
        assert [f.id for f in await store.failed()] == [out_of_attempts]
        # the lost worker can no longer fail or put back its attempt; the rescued job runs again
        assert not await store.fail(retried, claimed[retried].token, error="late", traceback=None, retry_at=None)
        await store.release(retried, claimed[retried].token)
        assert await state_of(store, retried) == "retrying"
        await asyncio.sleep(PAST_SHORT)  # a rescued job is due within one lease (rescue_spread)
        (again,) = await store.claim("q", 10, "w2")
        assert (again.id, again.attempt) == (retried, 2)

    drive(make_store, scenario)


def test_crash_counts_grow_by_a_crashed_attempt_and_by_a_lost_worker_that_ran_the_job_alone(
    make_store: StoreFactory,
) -> None:
    async def scenario(store: Store) -> None:
        (crasher,) = await store.enqueue([new_job(kind="in-process", lease_seconds=SHORT, max_attempts=10)])
        (job,) = await store.claim("q", 1, "w0")
        assert job.crashes == 0
        await store.fail(crasher, job.token, error="crashed", traceback=None, retry_at=time.time(), crashed=True)
        (job,) = await store.claim("q", 1, "w0")
        assert (job.attempt, job.crashes) == (2, 1)
        await store.fail(crasher, job.token, error="plain failure", traceback=None, retry_at=time.time())
        # lost workers: one that ran the job alone, one that ran two, one whose kind is not a crash kind
        (alone,) = await store.claim("q", 1, "w1")
        together = await store.enqueue(
            [new_job(kind="in-process", lease_seconds=SHORT, max_attempts=10) for _ in range(2)]
        )
        assert {job.id for job in await store.claim("q", 2, "w2")} == set(together)
        (isolated,) = await store.enqueue([new_job(kind="isolated", lease_seconds=SHORT, max_attempts=10)])
        assert len(await store.claim("q", 1, "w3")) == 1
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired(crash_kinds=["in-process"]) == 4
        assert await store.rescue_expired(crash_kinds=["in-process"]) == 0  # counted once
        await asyncio.sleep(PAST_SHORT)  # a rescued job is due within one lease (rescue_spread)
        crashes = {job.id: job.crashes for job in await store.claim("q", 10, "w4")}
        assert alone.id == crasher
        assert crashes == {crasher: 2, together[0]: 0, together[1]: 0, isolated: 0}

    drive(make_store, scenario)


def test_a_late_result_of_a_rescued_job_counts_until_it_is_claimed_again(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        late, reclaimed = await store.enqueue([new_job(lease_seconds=SHORT), new_job(lease_seconds=SHORT)])
        claimed = {job.id: job for job in await store.claim("q", 2, "w")}
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 2
        await store.complete([Completion(late, claimed[late].token, json.dumps(1))])
        assert await state_of(store, late) == "done"
        await asyncio.sleep(PAST_SHORT)  # a rescued job is due within one lease (rescue_spread)
        (again,) = await store.claim("q", 10, "w2")
        assert again.id == reclaimed
        await store.complete([Completion(reclaimed, claimed[reclaimed].token, json.dumps("stale"))])
        assert await state_of(store, reclaimed) == "running"  # it belongs to its new holder

    drive(make_store, scenario)


# -- key leases -----------------------------------------------------------------------------------


def test_a_running_attempt_renews_its_lease_and_its_key_a_stale_one_neither(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job(key="ep", lease_seconds=SHORT)])
        (first,) = await store.claim("q", 1, "w")
        holder = attempt_holder(job_id, first.token)
        assert await store.acquire_key_lease("q", "ep", holder=holder, limit=1, seconds=SHORT)
        for _ in range(3):  # renewed, it outlives its lease several times over
            await asyncio.sleep(SHORT / 2)
            assert await store.renew(job_id, first.token, seconds=SHORT * 4, key=("q", "ep"))
        assert await store.rescue_expired() == 0
        assert not await store.acquire_key_lease("q", "ep", holder=attempt_holder(job_id, 99), limit=1, seconds=60)
        # recorded failed while its code still runs: the job lease is gone, the key slot still renews
        await store.fail(job_id, first.token, error="TimeoutError", traceback=None, retry_at=time.time())
        assert not await store.renew(job_id, first.token, seconds=60, key=("q", "ep"))
        (retry,) = await store.claim("q", 1, "w")
        retry_holder = attempt_holder(job_id, retry.token)
        assert retry_holder != holder
        assert not await store.acquire_key_lease("q", "ep", holder=retry_holder, limit=1, seconds=60)  # no re-entry
        assert not await store.renew(job_id, first.token, seconds=60, key=None)  # a stale claim renews nothing
        await store.release_key_lease("q", "ep", holder=holder)
        assert await store.acquire_key_lease("q", "ep", holder=retry_holder, limit=1, seconds=60)
        await store.release_key_lease("q", "ep", holder=holder)  # the stale attempt cannot free the retry's slot
        assert not await store.acquire_key_lease("q", "ep", holder=attempt_holder(job_id, 99), limit=1, seconds=60)
        assert await store.renew(job_id, retry.token, seconds=60, key=("q", "ep"))

    drive(make_store, scenario)


def test_renew_blocking_from_another_thread_keeps_a_held_attempt_and_revives_no_stale_one(
    make_store: StoreFactory,
) -> None:
    async def scenario(store: Store) -> None:
        (job_id, other_id) = await store.enqueue([new_job(key="ep", lease_seconds=SHORT), new_job(lease_seconds=SHORT)])
        first, other = await store.claim("q", 2, "w")
        assert (first.id, other.id) == (job_id, other_id)
        holder = attempt_holder(job_id, first.token)
        assert await store.acquire_key_lease("q", "ep", holder=holder, limit=1, seconds=SHORT)
        leases = [
            HeldLease(job_id=job_id, token=first.token, seconds=60, key=("q", "ep")),
            HeldLease(job_id=other_id, token=other.token, seconds=60, key=None),
        ]
        # from a thread of its own, as the loop watchdog calls it while job code holds the loop
        await run_in_thread(store.renew_blocking, leases, name="test-renew-blocking")
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 0  # both job leases were extended
        assert not await store.acquire_key_lease("q", "ep", holder=attempt_holder(job_id, 99), limit=1, seconds=60)
        # a recorded attempt: renewing it revives no job lease (nor is the job running again)
        await store.fail(other_id, other.token, error="boom", traceback=None, retry_at=time.time() + 60)
        await run_in_thread(store.renew_blocking, leases[1:], name="test-renew-blocking")
        assert (await store.job_states([other_id]))[other_id].state == "retrying"

    drive(make_store, scenario)


def test_key_lease_slots_renewal_and_release_by_the_holder_only(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.acquire_key_lease("q", "ep", holder=1, limit=2, seconds=60)
        assert await store.acquire_key_lease("q", "ep", holder=2, limit=2, seconds=60)
        assert not await store.acquire_key_lease("q", "ep", holder=3, limit=2, seconds=60)
        assert await store.acquire_key_lease("q", "ep", holder=1, limit=2, seconds=60)  # its own slot: renewed
        assert await store.acquire_key_lease("q", "other", holder=3, limit=2, seconds=60)  # keys are apart
        assert await store.acquire_key_lease("q2", "ep", holder=3, limit=1, seconds=60)  # so are queues
        await store.release_key_lease("q", "ep", holder=3)  # holds no slot of this key: nothing happens
        assert not await store.acquire_key_lease("q", "ep", holder=4, limit=2, seconds=60)
        await store.release_key_lease("q", "ep", holder=1)
        assert await store.acquire_key_lease("q", "ep", holder=4, limit=2, seconds=60)
        assert not await store.acquire_key_lease("q", "ep", holder=5, limit=2, seconds=60)

    drive(make_store, scenario)


def test_an_expired_key_lease_is_free_again(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.acquire_key_lease("q", "ep", holder=1, limit=1, seconds=SHORT)
        assert not await store.acquire_key_lease("q", "ep", holder=2, limit=1, seconds=60)
        await asyncio.sleep(PAST_SHORT)
        assert await store.acquire_key_lease("q", "ep", holder=2, limit=1, seconds=60)
        assert not await store.acquire_key_lease("q", "ep", holder=1, limit=1, seconds=60)

    drive(make_store, scenario)


# -- claims on a per_key queue --------------------------------------------------------------------


async def enqueue_in_order(store: Store, *keys: str | None) -> list[int]:
    """One job per key (None: no key), each due a little later than the one before."""
    return await store.enqueue([new_job(key=key, delay=-10 + i * 0.01) for i, key in enumerate(keys)])


def test_a_keyed_claim_skips_jobs_whose_key_has_no_free_slot_and_takes_the_next(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        a1, a2, plain, b1, c1, c2, c3 = await enqueue_in_order(store, "a", "a", None, "b", "c", "c", "c")
        assert await store.acquire_key_lease("q", "b", holder=999, limit=1, seconds=60)  # b is held elsewhere
        first = await store.claim("q", 10, "w", per_key=1)
        assert [job.id for job in first] == [a1, plain, c1]  # a2, c2 and c3 wait for their key; b1 for b
        assert [job.attempt for job in first] == [1, 1, 1]
        # The claim took the keys' slots for its jobs: the executor's ask renews it, anybody else's fails.
        assert await store.acquire_key_lease("q", "a", holder=attempt_holder(a1, FIRST_CLAIM), limit=1, seconds=60)
        assert not await store.acquire_key_lease("q", "a", holder=attempt_holder(a2, FIRST_CLAIM), limit=1, seconds=60)
        assert not await store.acquire_key_lease("q", "c", holder=998, limit=1, seconds=60)
        assert await store.claim("q", 10, "w", per_key=1) == []
        assert (await store.counts())["q"] == QueueCounts(waiting=4, running=3)
        # A claim without per_key knows nothing of slots (a queue without the limit).
        (unlimited,) = await store.claim("q", 1, "w")
        assert unlimited.id == a2
        await store.release_key_lease("q", "c", holder=attempt_holder(c1, FIRST_CLAIM))
        # per_key=2: b has its second slot free, c both of its slots.
        assert [job.id for job in await store.claim("q", 10, "w", per_key=2)] == [b1, c2, c3]
        assert not await store.acquire_key_lease("q", "b", holder=997, limit=2, seconds=60)
        assert not await store.acquire_key_lease("q", "c", holder=997, limit=2, seconds=60)

    drive(make_store, scenario)


def test_release_blocking_from_another_thread_puts_held_attempts_back_unspent_and_frees_their_keys(
    make_store: StoreFactory,
) -> None:
    async def scenario(store: Store) -> None:
        keyed, plain, settled = await store.enqueue([new_job(key="ep"), new_job(), new_job()])
        jobs = await store.claim("q", 3, "w")
        assert [job.id for job in jobs] == [keyed, plain, settled]
        tokens = {job.id: job.token for job in jobs}
        holder = attempt_holder(keyed, tokens[keyed])
        assert await store.acquire_key_lease("q", "ep", holder=holder, limit=1, seconds=60)
        await store.complete([Completion(job_id=settled, token=tokens[settled], result_json=None)])
        leases = [
            HeldLease(job_id=keyed, token=tokens[keyed], seconds=60, key=("q", "ep")),
            HeldLease(job_id=plain, token=tokens[plain], seconds=60, key=None),
            HeldLease(job_id=settled, token=tokens[settled], seconds=60, key=None),  # recorded: stays done
        ]
        # from a thread of its own, as a worker whose stop is overdue calls it while job code holds the loop
        assert await run_in_thread(store.release_blocking, leases, name="test-release-blocking") == 2
        states = await store.job_states([keyed, plain, settled])
        assert [states[job_id].state for job_id in (keyed, plain, settled)] == ["waiting", "waiting", "done"]
        assert await store.acquire_key_lease("q", "ep", holder=attempt_holder(keyed, 99), limit=1, seconds=60)
        await store.release_key_lease("q", "ep", holder=attempt_holder(keyed, 99))
        again = await store.claim("q", 3, "w")
        assert sorted((job.id, job.attempt) for job in again) == [(keyed, 1), (plain, 1)]  # no attempt spent
        assert not await store.renew(plain, tokens[plain], seconds=60, key=None)  # the old claim holds nothing

    drive(make_store, scenario)


def test_a_freed_or_expired_key_slot_lets_the_next_job_of_the_key_be_claimed(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (short,) = await store.enqueue([new_job(key="a", delay=-20, lease_seconds=SHORT)])
        first, second, third = await enqueue_in_order(store, "a", "a", "a")
        assert [job.id for job in await store.claim("q", 10, "w", per_key=1)] == [short]
        assert await store.claim("q", 10, "w", per_key=1) == []
        await asyncio.sleep(PAST_SHORT)  # the holder is lost: its slot expires with its lease
        (job,) = await store.claim("q", 10, "w", per_key=1)
        assert job.id == first
        await store.complete([Completion(job_id=job.id, token=job.token, result_json=None)])
        assert await store.claim("q", 10, "w", per_key=1) == []  # done, but its slot is still held
        await store.release_key_lease("q", "a", holder=attempt_holder(first, FIRST_CLAIM))
        (job,) = await store.claim("q", 10, "w", per_key=1)
        assert (job.id, job.attempt) == (second, 1)  # skipped twice, no attempt spent
        await store.release_key_lease("q", "a", holder=999)  # not the holder: nothing is freed
        assert await store.claim("q", 10, "w", per_key=1) == []
        await store.release_key_lease("q", "a", holder=attempt_holder(second, FIRST_CLAIM))
        assert [job.id for job in await store.claim("q", 10, "w", per_key=1)] == [third]

    drive(make_store, scenario)


def test_keyed_claims_interleave_two_keys_one_job_of_each_at_a_time(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        ids = await enqueue_in_order(store, "a", "a", "a", "b", "b", "b")
        a_jobs, b_jobs = ids[:3], ids[3:]
        order: list[int] = []
        running = [job.id for job in await store.claim("q", 10, "w", per_key=1)]
        assert running == [a_jobs[0], b_jobs[0]]
        order += running
        while running:
            for job_id in running:
                key = "a" if job_id in a_jobs else "b"
                await store.release_key_lease("q", key, holder=attempt_holder(job_id, FIRST_CLAIM))
            running = [job.id for job in await store.claim("q", 10, "w", per_key=1)]
            assert len(running) <= 2 and len({job_id in a_jobs for job_id in running}) == len(running)
            order += running
        assert order == [a_jobs[0], b_jobs[0], a_jobs[1], b_jobs[1], a_jobs[2], b_jobs[2]]

    drive(make_store, scenario)


# -- events ---------------------------------------------------------------------------------------


def test_relay_routes_each_event_to_every_subscribed_kind_exactly_once(make_store: StoreFactory) -> None:
    routes = {
        "note.created": [Route(kind="index", queue="q1", max_attempts=4, lease_seconds=30.0)],
        "note.deleted": [
            Route(kind="index.drop", queue="q1", max_attempts=2, lease_seconds=30.0),
            Route(kind="notify", queue="q2", max_attempts=5, lease_seconds=30.0),
        ],
    }

    async def scenario(store: Store) -> None:
        assert await store.relay(routes, limit=10) == RelayPass(events=0, jobs=0)
        published = [
            await store.publish("note.created", json.dumps({"id": 1})),
            await store.publish("nobody.listens", json.dumps({})),
            await store.publish("note.deleted", json.dumps({"id": 2})),
        ]
        assert published == sorted(published)
        assert await store.relay(routes, limit=2) == RelayPass(events=2, jobs=1)  # oldest first
        assert await store.relay(routes, limit=10) == RelayPass(events=1, jobs=2)
        assert await store.relay(routes, limit=10) == RelayPass(events=0, jobs=0)
        assert await store.counts() == {"q1": QueueCounts(waiting=2), "q2": QueueCounts(waiting=1)}
        q1 = await store.claim("q1", 10, "w")
        assert [(job.kind, json.loads(job.args_json), job.max_attempts, job.key) for job in q1] == [
            ("index", {"id": 1}, 4, None),
            ("index.drop", {"id": 2}, 2, None),
        ]
        (q2,) = await store.claim("q2", 10, "w")
        assert (q2.kind, json.loads(q2.args_json), q2.max_attempts) == ("notify", {"id": 2}, 5)

    drive(make_store, scenario)


def test_conn_is_for_the_postgresql_store_only(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        with pytest.raises(ConfigError):
            await store.enqueue([new_job()], conn=object())
        with pytest.raises(ConfigError):
            await store.publish("t", "{}", conn=object())
        assert await store.counts() == {}

    drive(make_store, scenario)


# -- periodic jobs --------------------------------------------------------------------------------


def test_periodic_kinds_are_enqueued_once_per_period(make_store: StoreFactory) -> None:
    specs = [
        PeriodicSpec(kind="tick", queue="p", every=SHORT, max_attempts=2, lease_seconds=30.0, run_on_start=True),
        PeriodicSpec(kind="tock", queue="p", every=SHORT, max_attempts=2, lease_seconds=30.0, run_on_start=False),
        PeriodicSpec(kind="hourly", queue="p", every=3600, max_attempts=2, lease_seconds=30.0, run_on_start=False),
    ]

    async def scenario(store: Store) -> None:
        assert await store.schedule_periodic([]) == []
        first = await store.schedule_periodic(specs)
        assert len(first) == 1  # only the kind that runs on start
        assert await store.schedule_periodic(specs) == []  # not due again yet
        await asyncio.sleep(PAST_SHORT)
        together = await asyncio.gather(store.schedule_periodic(specs), store.schedule_periodic(specs))
        assert sorted(len(ids) for ids in together) == [0, 2]  # due once, whoever asks
        jobs = await store.claim("p", 10, "w")
        assert sorted(job.kind for job in jobs) == ["tick", "tick", "tock"]
        assert [(json.loads(job.args_json), job.max_attempts, job.key) for job in jobs] == [({}, 2, None)] * 3

    drive(make_store, scenario)


# -- inspection and pruning -----------------------------------------------------------------------


def test_counts_failed_and_job_states(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.counts() == {}
        assert await store.failed() == []
        assert await store.job_states([]) == {}
        ids = await store.enqueue([new_job("a", args={"i": i}) for i in range(5)] + [new_job("b", delay=60)])
        claimed = await store.claim("a", 4, "w")
        await store.complete([Completion(claimed[0].id, claimed[0].token, "1")])
        for job in claimed[1:3]:
            await store.fail(job.id, job.token, error=f"E{job.id}", traceback=None, retry_at=None)
        await store.fail(claimed[3].id, claimed[3].token, error="later", traceback=None, retry_at=time.time() + 60)
        assert await store.counts() == {
            "a": QueueCounts(waiting=1, retrying=1, failed=2, done=1),
            "b": QueueCounts(waiting=1),
        }
        failed = await store.failed()
        assert [f.id for f in failed] == [claimed[2].id, claimed[1].id]  # the latest first
        assert [json.loads(f.args_json) for f in failed] == [{"i": 2}, {"i": 1}]
        assert [f.queue for f in failed] == ["a", "a"]
        assert [f.id for f in await store.failed(limit=1)] == [claimed[2].id]
        states = await store.job_states(ids)
        assert [states[job_id].state for job_id in ids] == [
            "done",
            "failed",
            "failed",
            "retrying",
            "waiting",
            "waiting",
        ]
        assert [states[job_id].queue for job_id in ids] == ["a"] * 5 + ["b"]

    drive(make_store, scenario)


def test_prune_done_deletes_only_done_jobs_older_than_asked(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        done, failed, waiting = await store.enqueue([new_job(), new_job(), new_job(delay=60)])
        claimed = {job.id: job for job in await store.claim("q", 2, "w")}
        await store.complete([Completion(done, claimed[done].token, None)])
        await store.fail(failed, claimed[failed].token, error="E", traceback=None, retry_at=None)
        await asyncio.sleep(PAST_SHORT)
        assert await store.prune_done(older_than=3600) == 0
        assert await store.prune_done(older_than=SHORT) == 1
        assert set(await store.job_states([done, failed, waiting])) == {failed, waiting}
        assert await store.prune_done(older_than=0) == 0

    drive(make_store, scenario)


def test_a_free_key_is_leased_while_the_pruner_deletes_free_slot_rows(make_store: StoreFactory) -> None:
    """The pruner deletes unused slot rows; a lease taken at the same moment on a new key must not lose
    the rows it just made (it did on PostgreSQL: a free key refused its lease)."""

    async def scenario(store: Store) -> None:
        for index in range(40):
            leased, _ = await asyncio.gather(
                store.acquire_key_lease("q", f"key-{index}", holder=7, limit=2, seconds=60),
                store.prune_done(older_than=3600),
            )
            assert leased, f"key-{index}"

    drive(make_store, scenario)


# -- operating: what `corral jobs` and the dashboard read and change --------------------------------


def test_every_ended_attempt_is_recorded_and_refunded_ones_are_not(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job(max_attempts=4, lease_seconds=SHORT)])
        (first,) = await store.claim("q", 1, "w1")
        await store.release(job_id, first.token)  # refunded: no attempt ended
        (first,) = await store.claim("q", 1, "w1")
        await store.fail(job_id, first.token, error="E: boom", traceback="tb 1", retry_at=time.time())
        (second,) = await store.claim("q", 1, "w2")
        await store.fail(job_id, second.token, error="crashed", traceback=None, retry_at=time.time(), crashed=True)
        assert len(await store.claim("q", 1, "w3")) == 1
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 1
        await asyncio.sleep(PAST_SHORT)
        (fourth,) = await store.claim("q", 1, "w4")
        await store.complete([Completion(job_id, fourth.token, json.dumps(4))])
        attempts = await store.attempts(job_id)
        assert [(a.job_id, a.attempt, a.outcome, a.worker_id, a.crashed) for a in attempts] == [
            (job_id, 1, "retrying", "w1", False),
            (job_id, 2, "retrying", "w2", True),
            (job_id, 3, "retrying", "w3", False),
            (job_id, 4, "done", "w4", False),
        ]
        assert [(a.error, a.traceback) for a in attempts] == [
            ("E: boom", "tb 1"),
            ("crashed", None),
            (rescue_error("w3", 3), None),
            (None, None),
        ]
        for attempt in attempts:
            assert attempt.started_at is not None and attempt.started_at <= attempt.finished_at + 1
            assert abs(attempt.finished_at - time.time()) < 30
        assert await store.attempts(10**9) == []
        ended = await store.finished_since(time.time() - 60)
        assert [(queue, outcome) for queue, outcome, _ in ended] == [("q", "retrying")] * 3 + [("q", "done")]
        assert await store.finished_since(time.time() + 60) == []

    drive(make_store, scenario)


def test_a_cancelled_or_finally_failed_attempt_is_recorded_and_a_cancelled_waiting_job_has_none(
    make_store: StoreFactory,
) -> None:
    async def scenario(store: Store) -> None:
        running, failing, waiting = await store.enqueue([new_job(), new_job(max_attempts=1), new_job(delay=60)])
        held = {job.id: job for job in await store.claim("q", 2, "w1")}
        assert await store.cancel([running, waiting]) == [running, waiting]
        await store.fail(failing, held[failing].token, error="E: last", traceback="tb", retry_at=None)
        assert [(a.attempt, a.outcome, a.worker_id) for a in await store.attempts(running)] == [(1, "cancelled", "w1")]
        assert [(a.outcome, a.error) for a in await store.attempts(failing)] == [("failed", "E: last")]
        assert await store.attempts(waiting) == []

    drive(make_store, scenario)


def test_a_job_done_after_a_failed_attempt_shows_no_error_and_its_history_keeps_it(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job()])
        (first,) = await store.claim("q", 1, "w")
        await store.fail(job_id, first.token, error="E: boom", traceback="tb", retry_at=time.time())
        (second,) = await store.claim("q", 1, "w")
        await store.complete([Completion(job_id, second.token, json.dumps(2))])
        record = await store.job(job_id)
        assert record is not None and (record.state, record.error, record.traceback) == ("done", None, None)
        assert [(a.outcome, a.error) for a in await store.attempts(job_id)] == [("retrying", "E: boom"), ("done", None)]

    drive(make_store, scenario)


def test_a_job_cancelled_after_a_failed_attempt_shows_no_error_and_its_history_keeps_it(
    make_store: StoreFactory,
) -> None:
    """The cancelled attempt is not the failed one: neither it nor the job reports the earlier error."""

    async def scenario(store: Store) -> None:
        running, retrying = await store.enqueue([new_job(), new_job()])
        for job in await store.claim("q", 2, "w"):
            await store.fail(job.id, job.token, error="E: boom", traceback="tb", retry_at=time.time())
        (again,) = await store.claim("q", 1, "w")
        assert again.id == running
        assert sorted(await store.cancel([running, retrying])) == [running, retrying]
        for job_id in (running, retrying):
            record = await store.job(job_id)
            assert record is not None and (record.state, record.error, record.traceback) == ("cancelled", None, None)
        assert [(a.outcome, a.error) for a in await store.attempts(running)] == [
            ("retrying", "E: boom"),
            ("cancelled", None),
        ]
        assert [(a.outcome, a.error) for a in await store.attempts(retrying)] == [("retrying", "E: boom")]

    drive(make_store, scenario)


def test_a_done_job_keeps_its_worker_and_is_never_taken_for_held_by_it(make_store: StoreFactory) -> None:
    """A success is recorded by the job itself: it keeps the worker of its last attempt, and its attempts end
    with that attempt; nothing reads the job as running on that worker (counts, the running list, the
    rescue, the crash count of the worker's other job)."""

    async def scenario(store: Store) -> None:
        done, lost = await store.enqueue([new_job(kind="in-process", lease_seconds=SHORT) for _ in range(2)])
        claimed = {job.id: job for job in await store.claim("q", 2, "w")}
        await store.complete([Completion(done, claimed[done].token, json.dumps("ok"))])
        job = await store.job(done)
        assert job is not None
        assert (job.state, job.worker_id, job.lease_until, job.attempt) == ("done", "w", None, 1)
        (attempt,) = await store.attempts(done)
        assert (attempt.attempt, attempt.outcome, attempt.worker_id, attempt.error, attempt.traceback) == (
            1,
            "done",
            "w",
            None,
            None,
        )
        assert (attempt.started_at, attempt.finished_at, attempt.crashed) == (job.started_at, job.finished_at, False)
        assert [running.id for running in await store.list_jobs(JobFilter(state="running"))] == [lost]
        assert (await store.counts())["q"] == QueueCounts(running=1, done=1)
        await asyncio.sleep(PAST_SHORT)
        # the lost worker ran `lost` alone (the done job is no longer its): its crash count grows
        assert await store.rescue_expired(crash_kinds=["in-process"]) == 1
        assert (await store.counts())["q"] == QueueCounts(retrying=1, done=1)
        await asyncio.sleep(PAST_SHORT)  # a rescued job is due within one lease (rescue_spread)
        (again,) = await store.claim("q", 1, "w2")
        assert (again.id, again.crashes) == (lost, 1)
        await store.complete([Completion(lost, again.token, None)])
        assert [(a.attempt, a.outcome, a.worker_id) for a in await store.attempts(lost)] == [
            (1, "retrying", "w"),
            (2, "done", "w2"),
        ]
        ended = await store.finished_since(time.time() - 60)
        assert sorted(outcome for _, outcome, _ in ended) == ["done", "done", "retrying"]

    drive(make_store, scenario)


def test_a_late_result_of_a_rescued_job_ends_its_history_done(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job(lease_seconds=SHORT)])
        (claimed,) = await store.claim("q", 1, "w")
        await asyncio.sleep(PAST_SHORT)
        assert await store.rescue_expired() == 1
        await store.complete([Completion(job_id, claimed.token, json.dumps(1))])
        attempts = await store.attempts(job_id)
        assert [(a.attempt, a.outcome, a.worker_id, a.error) for a in attempts] == [
            (1, "retrying", "w", rescue_error("w", 1)),
            (1, "done", None, None),  # the rescue took the job from its worker
        ]

    drive(make_store, scenario)


def test_list_jobs_filters_newest_first_and_job_shows_one(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.list_jobs(JobFilter()) == [] and await store.job(1) is None
        before = time.time() - 1
        ids = await store.enqueue(
            [new_job("a", kind="k1", args={"n": 1}, key="x"), new_job("a", kind="k2"), new_job("b", delay=60)]
        )
        (claimed,) = await store.claim("a", 1, "w")
        await store.fail(claimed.id, claimed.token, error="E", traceback="tb", retry_at=None)
        assert [job.id for job in await store.list_jobs(JobFilter())] == ids[::-1]
        assert [job.id for job in await store.list_jobs(JobFilter(limit=2))] == ids[:0:-1]
        assert [job.id for job in await store.list_jobs(JobFilter(queue="a"))] == ids[1::-1]
        assert [job.id for job in await store.list_jobs(JobFilter(kind="k1"))] == [ids[0]]
        assert [job.id for job in await store.list_jobs(JobFilter(state="failed"))] == [ids[0]]
        assert [job.id for job in await store.list_jobs(JobFilter(queue="b", state="waiting"))] == [ids[2]]
        assert await store.list_jobs(JobFilter(since=time.time() + 60)) == []
        assert len(await store.list_jobs(JobFilter(since=before))) == 3
        job = await store.job(ids[0])
        assert job is not None
        assert (job.queue, job.kind, json.loads(job.args_json), job.key, job.state) == (
            "a",
            "k1",
            {"n": 1},
            "x",
            "failed",
        )
        assert (job.attempt, job.max_attempts, job.error, job.traceback, job.worker_id) == (1, 3, "E", "tb", None)
        assert job.started_at is not None and job.finished_at is not None and job.lease_until is None
        assert job.enqueued_at >= before and job.result_json is None and job.crashes == 0
        later = await store.job(ids[2])
        assert later is not None and later.run_at > time.time() + 30 and later.started_at is None

    drive(make_store, scenario)


def test_retry_failed_gives_failed_jobs_a_fresh_start_and_skips_the_others(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        ids = await store.enqueue(
            [new_job("a", max_attempts=1), new_job("a", max_attempts=1), new_job("b", max_attempts=1)]
        )
        (waiting,) = await store.enqueue([new_job("a", delay=60)])
        for queue in ("a", "b"):
            for job in await store.claim(queue, 10, "w"):
                await store.fail(job.id, job.token, error="E", traceback=None, retry_at=None, crashed=True)
        assert await store.retry_failed([ids[0], waiting, 10**9]) == [ids[0]]
        retried = await store.job(ids[0])
        assert retried is not None
        assert (retried.state, retried.attempt, retried.crashes, retried.finished_at, retried.error) == (
            "waiting",
            0,
            0,
            None,
            None,
        )
        assert await store.retry_failed(None, queue="b") == [ids[2]]
        assert await store.retry_failed(None) == [ids[1]]
        assert await store.retry_failed(None) == []
        assert {job.id: job.attempt for job in await store.claim("a", 10, "w")} == {ids[0]: 1, ids[1]: 1}
        assert len(await store.attempts(ids[0])) == 1  # the history stays

    drive(make_store, scenario)


def test_retry_failed_gives_a_fresh_count_of_retry_requests_too(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        (job_id,) = await store.enqueue([new_job(max_attempts=1)])
        for _ in range(3):  # the job asked to run later three times (raise Retry)
            (job,) = await store.claim("q", 1, "w")
            await store.snooze(job.id, job.token, seconds=0, retried=True)
        (job,) = await store.claim("q", 1, "w")
        assert job.retries == 3
        await store.fail(job.id, job.token, error="Retry: too often", traceback=None, retry_at=None)
        assert await store.retry_failed([job_id]) == [job_id]
        (again,) = await store.claim("q", 1, "w")
        assert (again.attempt, again.retries) == (1, 0)

    drive(make_store, scenario)


def test_retry_failed_leaves_a_unique_job_whose_key_is_held_and_retries_one_of_a_key(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        async def enqueue_and_fail(unique: str) -> int:
            (job_id,) = await store.enqueue([new_job("u", unique=unique, max_attempts=1)])
            (job,) = await store.claim("u", 10, "w")
            await store.fail(job.id, job.token, error="E", traceback=None, retry_at=None)
            return job_id

        held = await enqueue_and_fail("k")
        (holder,) = await store.enqueue([new_job("u", unique="k", delay=60)])  # the key is free: a new holder
        older, newer = await enqueue_and_fail("m"), await enqueue_and_fail("m")
        # `held` waiting again would be a second holder of "k"; of the two failed "m" jobs only one may be.
        assert await store.retry_failed(None) == [older]
        assert await state_of(store, held) == "failed" and await state_of(store, newer) == "failed"
        await store.cancel([holder])
        assert await store.retry_failed([held, newer]) == [held]  # "k" is free now; "m" still held

    drive(make_store, scenario)


def test_purge_deletes_final_jobs_older_than_asked_with_their_attempts(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        done, failed, running = await store.enqueue([new_job(), new_job(max_attempts=1), new_job()])
        (waiting,) = await store.enqueue([new_job(delay=60)])
        claimed = {job.id: job for job in await store.claim("q", 3, "w")}
        await store.complete([Completion(done, claimed[done].token, None)])
        await store.fail(failed, claimed[failed].token, error="E", traceback=None, retry_at=None)
        with pytest.raises(ConfigError, match="final states only"):
            await store.purge(states=["done", "waiting"], older_than=0)
        with pytest.raises(ConfigError, match="final states only"):
            await store.purge(states=[], older_than=0)
        await asyncio.sleep(PAST_SHORT)
        assert await store.purge(states=["done", "failed"], older_than=3600) == 0
        assert await store.purge(states=["failed"], older_than=SHORT) == 1
        assert await store.attempts(failed) == []
        assert await store.purge(states=["done", "failed"], older_than=SHORT) == 1
        assert set(await store.job_states([done, failed, running, waiting])) == {running, waiting}

    drive(make_store, scenario)


def test_key_leases_lists_the_held_slots(make_store: StoreFactory) -> None:
    async def scenario(store: Store) -> None:
        assert await store.key_leases() == []
        assert await store.acquire_key_lease("q", "k", holder=7, limit=2, seconds=60)
        assert await store.acquire_key_lease("q", "k", holder=8, limit=2, seconds=60)
        assert await store.acquire_key_lease("q", "short", holder=9, limit=1, seconds=SHORT)
        leases = await store.key_leases()
        assert [(lease.queue, lease.key, lease.holder) for lease in leases] == [
            ("q", "k", 7),
            ("q", "k", 8),
            ("q", "short", 9),
        ]
        assert sorted(lease.slot for lease in leases[:2]) == [0, 1] and leases[0].busy_until > time.time() + 30
        await store.release_key_lease("q", "k", holder=7)
        await asyncio.sleep(PAST_SHORT)
        assert [(lease.key, lease.holder) for lease in await store.key_leases()] == [("k", 8)]

    drive(make_store, scenario)


def test_open_existing_reads_a_migrated_store(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        await store.migrate()
        await store.open()
        (job_id,) = await store.enqueue([new_job()])
        if isinstance(store, MemoryStore):
            reader: Store = store  # the jobs live in this object: the same one opens again
        else:
            await store.close()
            reader = make_store()
        await reader.open_existing(read_only=True)
        try:
            assert [job.id for job in await reader.list_jobs(JobFilter())] == [job_id]
            assert (await reader.counts())["q"] == QueueCounts(waiting=1)
        finally:
            await reader.close()

    asyncio.run(main())
