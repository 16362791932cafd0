"""Unique jobs, priorities and batch enqueue through the Runtime, on SQLite and PostgreSQL: what a caller
gets back, what is refused, and that concurrent enqueuers in several processes never make two jobs of
one unique key (the store's index decides, not the callers)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import psycopg
import pytest
from conftest import Cli
from corral.runtime import ConfigError, Enqueued, JobArgumentError, JobContext, JobRequest, Queue
from runtime_helpers import Backend, PostgresBackend, make_runtime


def test_a_duplicate_answers_the_holders_id_and_says_so(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("report", unique="by-args")
    async def report(ctx: JobContext, day: int, lang: str = "en") -> int:
        return day

    @queue.job("mail")
    async def mail(ctx: JobContext, to: str) -> None:
        return None

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        await runtime.start(queues=[])  # nothing runs: the jobs stay waiting
        try:
            first = await runtime.enqueue("report", day=1, lang="fr")
            assert isinstance(first, Enqueued) and isinstance(first, int) and not first.duplicate
            assert (f"{first}", json.dumps(first)) == (str(int(first)), str(int(first)))  # prints as an id
            same = await runtime.enqueue("report", lang="fr", day=1)  # the same arguments in another order
            assert (same, same.duplicate, same.id) == (first, True, int(first))
            assert not (await runtime.enqueue("report", day=2)).duplicate
            assert not (await runtime.enqueue("report", day=1, lang="fr", unique=False)).duplicate
            # A string key is per kind: the same key of another kind is another key.
            keyed = await runtime.enqueue("mail", to="ada", unique="daily")
            assert (await runtime.enqueue("mail", to="bob", unique="daily")) == keyed
            assert not (await runtime.enqueue("report", day=9, unique="daily")).duplicate
            # "for": one per window of that many seconds (the key carries the window).
            windowed = await runtime.enqueue("mail", to="eve", unique={"key": "w", "for": 3600})
            assert (await runtime.enqueue("mail", to="eve", unique={"key": "w", "for": 3600})) == windowed
        finally:
            await runtime.stop()
        assert db.state_counts() == {"waiting": 6}

    asyncio.run(main())


def test_a_finished_unique_job_frees_its_key_unless_its_states_hold_it(db: Backend) -> None:
    queue = Queue("q", max_workers=2, timeout=5)

    @queue.job("sync.once")
    async def once(ctx: JobContext, n: int) -> int:
        return n

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            first = await runtime.enqueue("sync.once", n=1, unique=True)
            assert (await runtime.wait(first, timeout=5)).state == "done"
            second = await runtime.enqueue("sync.once", n=1, unique=True)
            assert not second.duplicate and second != first
            assert (await runtime.wait(second, timeout=5)).state == "done"
            held = {"states": ["waiting", "running", "retrying", "done"]}
            kept = await runtime.enqueue("sync.once", n=2, unique=held)
            assert (await runtime.wait(kept, timeout=5)).state == "done"
            assert (await runtime.enqueue("sync.once", n=2, unique=held)) == kept

    asyncio.run(main())


@pytest.mark.parametrize(
    ("unique", "message"),
    [
        ("", "unique key must be 'by-args' or a non-empty string"),
        (7, "unique must be True, 'by-args', a key string or a dict"),
        ({"key": "k", "till": 3}, "unknown field(s) ['till']"),
        ({"states": ["waiting"]}, "must include waiting, running, retrying"),
        ({"states": ["waiting", "running", "retrying", "gone"]}, "unknown unique state(s) ['gone']"),
        ({"for": 0}, "'for' must be a positive number of seconds"),
    ],
)
def test_a_bad_unique_is_refused_with_its_reason(unique: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        Queue("q", max_workers=1, timeout=5).job("k", unique=unique)


def test_bad_priorities_and_unique_values_are_refused_at_enqueue_and_declaration(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("k")
    async def k(ctx: JobContext) -> None:
        return None

    for bad in (4, -1, True, 1.5, "high"):
        with pytest.raises(ConfigError, match="priority must be an integer from 0 to 3"):
            queue.job(f"k{bad!s}".replace(".", "_").replace("-", "_"), priority=bad)  # type: ignore[arg-type]
    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            with pytest.raises(JobArgumentError, match="job of kind 'k': priority must be an integer from 0 to 3"):
                await runtime.enqueue("k", priority=9)
            with pytest.raises(JobArgumentError, match="job of kind 'k': unique states must be a list"):
                await runtime.enqueue("k", unique={"states": "waiting"})
            with pytest.raises(JobArgumentError, match="takes JobRequest items, got tuple"):
                await runtime.enqueue_many([("k", {})])  # type: ignore[list-item]
        assert db.state_counts() == {}

    asyncio.run(main())


def test_claims_run_higher_priorities_first_and_a_kind_gives_the_default(db: Backend) -> None:
    queue = Queue("q", max_workers=1, timeout=5)
    order: list[str] = []

    @queue.job("step")
    async def step(ctx: JobContext, name: str) -> None:
        order.append(name)

    @queue.job("urgent", priority=3)
    async def urgent(ctx: JobContext, name: str) -> None:
        order.append(name)

    producer = make_runtime(db, [queue])
    worker = make_runtime(db, [queue])

    async def main() -> None:
        await producer.start(queues=[])
        try:
            ids = [
                await producer.enqueue("step", name="low"),
                await producer.enqueue("step", name="two", priority=2),
                await producer.enqueue("urgent", name="urgent"),
                await producer.enqueue("urgent", name="demoted", priority=0),
                await producer.enqueue("step", name="one", priority=1),
            ]
        finally:
            await producer.stop()
        async with worker:
            for job_id in ids:
                assert (await worker.wait(job_id, timeout=5)).state == "done"
        assert order == ["urgent", "two", "one", "low", "demoted"]

    asyncio.run(main())


def test_enqueue_many_stores_all_or_none_and_answers_each_in_order(db: Backend) -> None:
    queue = Queue("q", max_workers=4, timeout=5)

    @queue.job("add")
    async def add(ctx: JobContext, a: int, b: int) -> int:
        return a + b

    runtime = make_runtime(db, [queue])

    async def main() -> None:
        async with runtime:
            assert await runtime.enqueue_many([]) == []
            with pytest.raises(JobArgumentError, match="do not fit job kind 'add'"):
                await runtime.enqueue_many([JobRequest("add", a=1, b=2), JobRequest("add", a=1)])
            assert db.state_counts() == {}  # the first one was not stored either
            ids = await runtime.enqueue_many(
                [
                    JobRequest("add", a=1, b=2, unique=True),
                    JobRequest("add", a=3, b=4, priority=3, delay=0.05),
                    JobRequest("add", a=1, b=2, unique=True),
                    JobRequest("add", a=5, b=6, key="k"),
                ]
            )
            assert [answer.duplicate for answer in ids] == [False, False, True, False]
            assert ids[2] == ids[0] and len({ids[0], ids[1], ids[3]}) == 3
            results = [(await runtime.wait(job_id, timeout=5)).result for job_id in ids]
            assert results == [3, 7, 3, 11]

    asyncio.run(main())


def test_enqueue_many_in_the_callers_transaction_exists_only_if_it_commits(pg: PostgresBackend) -> None:
    queue = Queue("q", max_workers=2, timeout=5)

    @queue.job("add")
    async def add(ctx: JobContext, a: int) -> int:
        return a

    runtime = make_runtime(pg, [queue])

    async def main() -> None:
        async with runtime:
            async with await psycopg.AsyncConnection.connect(pg.url) as conn:
                async with conn.transaction(force_rollback=True):
                    rolled = await runtime.enqueue_many([JobRequest("add", a=1), JobRequest("add", a=2)], conn=conn)
                    assert len(rolled) == 2
                async with conn.transaction():
                    kept = await runtime.enqueue_many([JobRequest("add", a=3, unique=True)], conn=conn)
            assert (await runtime.wait(kept[0], timeout=5)).result == 3
            assert pg.scalar("SELECT COUNT(*) FROM corral_jobs") == 1

    asyncio.run(main())


@pytest.mark.parametrize("how", ["one-by-one", "batch"])
def test_concurrent_enqueuers_in_four_processes_make_one_job_per_unique_key(cli: Cli, how: str) -> None:
    keys = 300
    start_at = time.time() + 3.0  # every process is up and its store open by then
    enqueuers = [
        subprocess.Popen(
            [sys.executable, "-m", "uniqueapp", str(start_at), str(keys), "batch" if how == "batch" else "single"],
            env=cli.env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    answers = []
    for process in enqueuers:
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        answers.extend(json.loads(out))
    assert cli.db.state_counts() == {"waiting": keys}
    by_key: dict[int, set[int]] = {}
    inserted: dict[int, int] = {}
    for key, job_id, duplicate in answers:
        by_key.setdefault(key, set()).add(job_id)
        inserted[key] = inserted.get(key, 0) + (not duplicate)
    assert all(len(ids) == 1 for ids in by_key.values())  # every process got the one job's id
    assert inserted == dict.fromkeys(range(keys), 1)  # and exactly one of them inserted it
