"""What the stores cannot hold fails only its own job, or the call that brought it, with a clear error.

Every test runs on SQLite, PostgreSQL and the memory store (``store`` fixture): SQLite and the memory
store accept text PostgreSQL refuses, so the runtime holds every store to PostgreSQL's limits and the
first refusal never comes in production. Job states and attempts are read from the store's own tables
(through the database's driver) where there are tables.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import JobArgumentError, JobContext, Queue, Runtime
from corral.runtime.completer import Completer, Finished
from corral.runtime.config import RuntimeConfig
from corral.runtime.events import EventHooks
from corral.runtime.lifecycle import Lifecycle, State
from corral.runtime.payloads import MAX_ERROR_CHARS, MAX_JSON_DEPTH
from corral.runtime.producer import Producer
from corral.runtime.stats import RuntimeStats
from corral.runtime.stores import open_store
from corral.runtime.stores.protocol import Completion, NewJob
from runtime_helpers import Backend, SqliteBackend

INNOCENT = 10


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# Results PostgreSQL's jsonb refuses (or Python cannot write back), each with what its error says.
POISONS = {
    "nul": ("a\x00b", "NUL character"),
    "surrogate": ("a\udc80b", "lone surrogate"),
    "surrogate-key": ({"\ud800": 1}, "lone surrogate"),
    "deep": (_nested(5000), f"nested more than {MAX_JSON_DEPTH} levels deep"),
    "not-json": ({1, 2}, "not JSON"),
}


class Store:
    """One store under test: its URL and, for the SQL stores, its tables."""

    def __init__(self, url: str, backend: Backend | None) -> None:
        self.url = url
        self.backend = backend

    def runtime(self, queues: list[Queue], **kwargs: Any) -> Runtime:
        kwargs.setdefault("retry_base", 0.02)
        kwargs.setdefault("rescue_interval", 0.2)
        return Runtime(queues=queues, store=self.url, **kwargs)


@pytest.fixture(params=["sqlite", "postgresql", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        backend: Backend = SqliteBackend(tmp_path / "jobs.db")
        yield Store(backend.url, backend)
    elif request.param == "postgresql":
        backend = request.getfixturevalue("pg")
        yield Store(backend.url, backend)
    else:
        yield Store("memory://", None)


def _innocents_and_poison(store: Store, poisoned: Any, *, raises: bool) -> tuple[Runtime, Counter[int]]:
    """11 workers: 10 innocent jobs and one whose result (or, ``raises``, error text) is ``poisoned``."""
    queue = Queue("q", max_workers=INNOCENT + 1, timeout=10)
    runs: Counter[int] = Counter()

    @queue.job("innocent", max_attempts=3)
    async def innocent(ctx: JobContext, n: int) -> dict[str, int]:
        runs[ctx.job_id] += 1
        return {"n": n}

    @queue.job("poison", max_attempts=1)
    async def poison(ctx: JobContext) -> Any:
        runs[ctx.job_id] += 1
        if raises:
            raise ValueError(poisoned)
        return poisoned

    return store.runtime([queue]), runs


def _check_outcome(store: Store, outcome: dict[str, Any], fragment: str) -> None:
    runs: Counter[int] = outcome["runs"]
    ids: list[int] = outcome["ids"]
    poisoned: int = outcome["poisoned"]
    statuses = outcome["statuses"]
    assert {runs[job_id] for job_id in ids} == {1}, runs  # each innocent job ran once
    assert runs[poisoned] == 1
    assert [statuses[job_id].state for job_id in ids] == ["done"] * INNOCENT
    assert [statuses[job_id].result for job_id in ids] == [{"n": n} for n in range(INNOCENT)]
    failed = statuses[poisoned]
    assert failed.state == "failed", failed
    assert fragment in (failed.error or ""), failed.error
    if store.backend is not None:
        rows = {job_id: store.backend.job_row(job_id) for job_id in [*ids, poisoned]}
        assert {rows[job_id]["state"] for job_id in ids} == {"done"}
        assert {rows[job_id]["attempt"] for job_id in ids} == {1}
        assert (rows[poisoned]["state"], rows[poisoned]["attempt"]) == ("failed", 1)
        assert fragment in rows[poisoned]["last_error"]


def _run_innocents_and_poison(store: Store, poisoned: Any, *, raises: bool) -> dict[str, Any]:
    runtime, runs = _innocents_and_poison(store, poisoned, raises=raises)

    async def main() -> dict[str, Any]:
        async with runtime:
            # enqueued with a delay, so every job becomes runnable at once and they finish together
            ids = [await runtime.enqueue("innocent", n=n, delay=0.3) for n in range(INNOCENT)]
            poisoned_id = await runtime.enqueue("poison", delay=0.3)
            statuses = {job_id: await runtime.wait(job_id, timeout=10) for job_id in [*ids, poisoned_id]}
            await asyncio.sleep(0.3)  # a wrongly rescued job would run again meanwhile (rescue every 0.2 s)
            failed = await runtime.failed_jobs()
        return {"runs": runs, "ids": ids, "poisoned": poisoned_id, "statuses": statuses, "failed": failed}

    return asyncio.run(main())


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_one_unstorable_result_fails_only_its_own_job(store: Store, poison: str) -> None:
    value, fragment = POISONS[poison]
    outcome = _run_innocents_and_poison(store, value, raises=False)
    _check_outcome(store, outcome, fragment)
    assert "the result of job kind 'poison'" in (outcome["statuses"][outcome["poisoned"]].error or "")


# Ids of plain ASCII: parallel workers compare the collected ids, and a lone surrogate does not round-trip.
@pytest.mark.parametrize(
    "text", ["a\x00b", "a\udc80b", "x" * (MAX_ERROR_CHARS * 3)], ids=["nul", "surrogate", "too-long"]
)
def test_an_unstorable_error_text_is_escaped_and_the_failure_kept(store: Store, text: str) -> None:
    outcome = _run_innocents_and_poison(store, text, raises=True)
    _check_outcome(store, outcome, "ValueError: a" if len(text) < 10 else "more characters cut")
    (failed,) = outcome["failed"]
    assert failed.id == outcome["poisoned"] and failed.attempt == 1
    assert "\x00" not in (failed.error or "") and "\x00" not in (failed.traceback or "")
    (failed.error or "").encode("utf-8")  # no lone surrogate left
    (failed.traceback or "").encode("utf-8")
    if "\x00" in text:
        assert failed.error == "ValueError: a\\x00b"
    elif "\udc80" in text:
        assert failed.error == "ValueError: a\\udc80b"
    else:
        assert len(failed.error or "") < MAX_ERROR_CHARS + 100


def test_an_exception_whose_str_raises_still_fails_its_job(store: Store) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    @queue.job("bad", max_attempts=1)
    async def bad(ctx: JobContext) -> None:
        raise Unprintable

    runtime = store.runtime([queue])

    async def main() -> None:
        async with runtime:
            status = await runtime.wait(await runtime.enqueue("bad"), timeout=5)
            assert status.state == "failed"
            assert status.error == "Unprintable: <str() of the exception failed>"

    asyncio.run(main())


# -- the completer: a batch the store refuses is recorded row by row ----------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_batch_the_store_refuses_is_recorded_row_by_row(kind: str, tmp_path: Path, request: Any) -> None:
    """Past the runtime's checks (a result written without them): the real store refuses the batch, the
    completer records the rows one by one, and only the refused one fails."""
    backend: Backend = SqliteBackend(tmp_path / "jobs.db") if kind == "sqlite" else request.getfixturevalue("pg")
    store = open_store(backend.url, max_conns=2)
    # A raw lone surrogate in the JSON text: sqlite3 and psycopg both refuse to encode it.
    refused = '"a\udc80"'

    async def main() -> None:
        await store.open()
        try:
            new = NewJob(queue="q", kind="k", args_json="{}", key=None, run_at=0, max_attempts=3, lease_seconds=30)
            await store.enqueue([new] * (INNOCENT + 1))
            claimed = await store.claim("q", INNOCENT + 1, "w")
            assert len(claimed) == INNOCENT + 1
            completer = Completer(
                store=store,
                stats=RuntimeStats(),
                waiters=_NoWaiters(),  # type: ignore[arg-type]
                events=EventHooks(()),
            )
            for job in claimed:
                result_json = refused if job is claimed[-1] else f'{{"n":{job.id}}}'
                completion = Completion(job_id=job.id, token=job.token, result_json=result_json)
                completer.submit(Finished(completion=completion, job=job, duration=0.0))
            completer.finish()
            await completer.run()
        finally:
            await store.close()
        rows = {row["id"]: row for row in backend.rows("SELECT id, state, attempt, last_error FROM corral_jobs")}
        poisoned = claimed[-1].id
        assert {rows[job.id]["state"] for job in claimed[:-1]} == {"done"}
        assert (rows[poisoned]["state"], rows[poisoned]["attempt"]) == ("failed", 1)
        assert f"the result of job {poisoned} was refused by the" in rows[poisoned]["last_error"]

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_refused_result_riding_a_claim_fails_only_its_job_and_the_claim_goes_alone(
    kind: str, tmp_path: Path, request: Any
) -> None:
    """A claim carrying completions the store refuses (one result it cannot encode) claims again alone;
    the completer records the batch row by row: the innocent jobs done, the refused one failed."""
    backend: Backend = SqliteBackend(tmp_path / "jobs.db") if kind == "sqlite" else request.getfixturevalue("pg")
    store = open_store(backend.url, max_conns=2)
    refused = '"a\udc80"'
    queue = Queue("q", max_workers=INNOCENT + 2)
    lifecycle = Lifecycle()
    lifecycle.enter(State.STARTING)
    lifecycle.enter(State.RUNNING)

    async def main() -> list[int]:
        await store.open()
        try:
            new = NewJob(queue="q", kind="k", args_json="{}", key=None, run_at=0, max_attempts=3, lease_seconds=30)
            await store.enqueue([new] * (INNOCENT + 2))
            claimed = await store.claim("q", INNOCENT + 1, "w")
            completer = Completer(
                store=store,
                stats=RuntimeStats(),
                waiters=_NoWaiters(),  # type: ignore[arg-type]
                events=EventHooks(()),
            )
            producer = Producer(
                queue=queue,
                store=store,
                executor=None,  # type: ignore[arg-type]  # a claim alone starts no job
                completer=completer,
                config=RuntimeConfig(queues=[queue]),
                lifecycle=lifecycle,
                worker_id="w",
                pushed=False,
            )
            for job in claimed:
                result_json = refused if job is claimed[-1] else f'{{"n":{job.id}}}'
                completion = Completion(job_id=job.id, token=job.token, result_json=result_json)
                completer.submit(Finished(completion=completion, job=job, duration=0.0))
            (last,) = await producer._claim(5)  # carries the batch, is refused, claims alone
            completer.finish()
            await completer.run()
            return [job.id for job in claimed] + [last.id]
        finally:
            await store.close()

    *innocent, poisoned, last = asyncio.run(main())
    rows = {row["id"]: row for row in backend.rows("SELECT id, state, attempt, last_error FROM corral_jobs")}
    assert {rows[job_id]["state"] for job_id in innocent} == {"done"}
    assert (rows[poisoned]["state"], rows[poisoned]["attempt"]) == ("failed", 1)
    assert f"the result of job {poisoned} was refused by the" in rows[poisoned]["last_error"]
    assert rows[last]["state"] == "running"


class _NoWaiters:
    def settled(self, job_id: int) -> None:
        return None


# -- bad arguments: JobArgumentError, and nothing written ----------------------------------------------

BAD_ARGUMENTS = {
    "deep": _nested(5000),
    "deep-enough": _nested(MAX_JSON_DEPTH + 1),
    "nul": "a\x00b",
    "surrogate": "a\udc80b",
    "surrogate-key": {"\udc80": 1},
    "nul-key": {"a\x00": 1},
    "not-json": object(),
    "nan": float("nan"),
    "cycle": None,  # made below: a list holding itself
}


@pytest.mark.parametrize("bad", sorted(BAD_ARGUMENTS))
def test_every_bad_argument_is_a_job_argument_error_and_writes_nothing(store: Store, bad: str) -> None:
    value = BAD_ARGUMENTS[bad]
    if bad == "cycle":
        cycle: list[Any] = []
        cycle.append(cycle)
        value = cycle
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("takes.value", on="thing.happened")
    async def takes_value(ctx: JobContext, value: Any) -> None:
        return None

    runtime = store.runtime([queue])

    async def main() -> None:
        async with runtime:
            with pytest.raises(JobArgumentError, match=r"argument 'value' of job kind 'takes\.value'"):
                await runtime.enqueue("takes.value", value=value)
            with pytest.raises(JobArgumentError, match=r"argument 'value' of job kind 'takes\.value'"):
                await runtime.publish("thing.happened", {"value": value})
            with pytest.raises(JobArgumentError, match=r"payload of event 'nobody\.listens'"):
                await runtime.publish("nobody.listens", {"value": value})
            for key in ("a\x00", "a\udc80"):
                with pytest.raises(JobArgumentError, match="key must be"):
                    await runtime.enqueue("takes.value", value=1, key=key)
            assert (await runtime.counts())["q"].waiting == 0

    asyncio.run(main())
    if store.backend is not None:
        assert store.backend.scalar("SELECT COUNT(*) AS n FROM corral_jobs") == 0
        assert store.backend.scalar("SELECT COUNT(*) AS n FROM corral_events") == 0


def test_a_deep_but_storable_argument_round_trips(store: Store) -> None:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("echo")
    async def echo(ctx: JobContext, value: Any) -> Any:
        return value

    runtime = store.runtime([queue])
    deep = _nested(MAX_JSON_DEPTH - 1)  # one level left for the arguments' object
    pair = "\U0001f600 [{ \\ud800"  # a real non-BMP character, brackets and a backslash in text: all fine

    async def main() -> None:
        async with runtime:
            status = await runtime.wait(await runtime.enqueue("echo", value=deep), timeout=5)
            assert (status.state, status.result) == ("done", _nested(MAX_JSON_DEPTH - 1))
            status = await runtime.wait(await runtime.enqueue("echo", value=pair), timeout=5)
            assert (status.state, status.result) == ("done", pair)

    asyncio.run(main())
