"""The stores as a whole: the scheme registry, one table shape in both SQL stores, the attempts history both
keep (a success recorded by its job row, and the done rows recorded before that), the .sql files in the
wheel, and a whole Runtime on the in-memory store (what an application's own tests would do)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import TEST_DATABASE
from corral.runtime import ConfigError, JobContext, Queue, Runtime, StoreUnavailable
from corral.runtime.stores import SCHEMES, open_store
from corral.runtime.stores.memory import MemoryStore
from corral.runtime.stores.postgres import PostgresStore
from corral.runtime.stores.postgres import store as postgres_module
from corral.runtime.stores.protocol import Completion, NewJob, Store
from corral.runtime.stores.sqlite import SqliteStore
from corral.runtime.stores.sqlite import store as sqlite_module
from runtime_helpers import PostgresBackend

REPO = Path(__file__).resolve().parents[2]
STORES = REPO / "runtime" / "stores"

# -- the scheme registry --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "store_type"),
    [
        ("sqlite:///jobs.db", SqliteStore),
        ("sqlite:////tmp/jobs.db", SqliteStore),
        ("postgresql://app@db/app", PostgresStore),
        ("postgres://app@db/app", PostgresStore),
        ("memory://", MemoryStore),
    ],
)
def test_open_store_maps_each_scheme_to_its_store(url: str, store_type: type) -> None:
    assert type(open_store(url)) is store_type


def test_every_store_folder_has_a_scheme_and_every_scheme_opens_its_example() -> None:
    folders = {path.parent.name for path in STORES.glob("*/__init__.py")}
    assert folders == {scheme.name for scheme in SCHEMES}
    for scheme in SCHEMES:
        assert isinstance(open_store(scheme.example), Store), scheme.name


def test_open_store_passes_a_store_through_and_sizes_an_owned_pool() -> None:
    store = MemoryStore()
    assert open_store(store) is store
    assert open_store("postgresql://app@db/app", max_conns=7).pool_size == 7
    assert open_store("memory://") is not open_store("memory://")  # each URL is a new, empty store


def test_open_store_refuses_unknown_schemes_and_bad_sqlite_urls() -> None:
    with pytest.raises(StoreUnavailable, match="unsupported store URL 'redis://localhost'") as refused:
        open_store("redis://localhost")
    assert all(scheme.example in str(refused.value) for scheme in SCHEMES)
    with pytest.raises(StoreUnavailable, match="not a sqlite URL"):
        open_store("sqlite:jobs.db")
    with pytest.raises(StoreUnavailable, match="names no file"):
        open_store("sqlite:///")
    with pytest.raises(ConfigError, match="store must be a URL or a Store, got int"):
        open_store(3)  # type: ignore[arg-type]


# -- one table shape ------------------------------------------------------------------------------

TABLES = ("jobs", "events", "key_leases", "periodic", "schema_version", "attempts")


def test_both_sql_stores_have_the_same_tables_and_columns(tmp_path: Path, pg: PostgresBackend) -> None:
    path = tmp_path / "jobs.db"
    asyncio.run(SqliteStore(path=path).migrate())
    conn = sqlite3.connect(path)
    try:
        # (name, nullable); a primary key column counts as NOT NULL (SQLite does not mark it)
        sqlite_columns = {
            table: [
                (name, not (notnull or pk))
                for _, name, _, notnull, _, pk in conn.execute(f"PRAGMA table_info(corral_{table})")
            ]
            for table in TABLES
        }
    finally:
        conn.close()
    home = pg.scalar("SELECT current_schema()")
    postgres_columns = {
        table: [
            (row["column_name"], row["is_nullable"] == "YES")
            for row in pg.rows(
                "SELECT column_name, is_nullable FROM information_schema.columns"
                f" WHERE table_schema = '{home}' AND table_name = 'corral_{table}' ORDER BY ordinal_position"
            )
        ]
        for table in TABLES
    }
    assert sqlite_columns == postgres_columns
    assert sqlite_columns["key_leases"] == [
        ("queue", False),
        ("key", False),
        ("slot", False),
        ("holder", True),
        ("busy_until", True),
    ]


# -- the attempts history ------------------------------------------------------------------------


class SqlStoreUnderTest:
    """A fresh, unmigrated SQL store (a SQLite file or a PostgreSQL schema), its module (whose migrations a
    test may hold back) and its tables read directly."""

    def __init__(self, kind: str, location: str, module: Any) -> None:
        self.kind, self.location, self.module = kind, location, module

    def make(self) -> Store:
        if self.kind == "sqlite":
            return SqliteStore(path=self.location)
        return PostgresStore(self.location, max_size=2, min_size=1)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.location)
            try:
                return conn.execute(query).fetchall()
            finally:
                conn.close()
        with psycopg.connect(self.location, autocommit=True) as pg_conn:
            return pg_conn.execute(query).fetchall()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> SqlStoreUnderTest:
    if request.param == "sqlite":
        return SqlStoreUnderTest("sqlite", str(tmp_path / "jobs.db"), sqlite_module)
    server = request.getfixturevalue("pg_server")
    return SqlStoreUnderTest("postgres", server.create_schema(TEST_DATABASE, "h"), postgres_module)


def _job() -> NewJob:
    return NewJob("q", "k", "{}", None, time.time(), 3, 30.0)


ATTEMPT_ROWS = "SELECT job_id, attempt, outcome, worker_id FROM corral_attempts ORDER BY id"


def test_a_success_writes_no_attempts_row_and_its_job_row_shows_the_attempt(sql_store: SqlStoreUnderTest) -> None:
    async def main() -> tuple[int, list[int]]:
        store = sql_store.make()
        await store.migrate()
        await store.open()
        try:
            (flaky,) = await store.enqueue([_job()])
            (first,) = await store.claim("q", 1, "w1")
            await store.fail(flaky, first.token, error="E: once", traceback="tb", retry_at=time.time())
            (second,) = await store.claim("q", 1, "w2")
            await store.complete([Completion(flaky, second.token, None)])  # one completion: complete_one.sql
            batch = await store.enqueue([_job(), _job()])
            await store.complete([Completion(job.id, job.token, "1") for job in await store.claim("q", 2, "w3")])
            shown = [(a.attempt, a.outcome, a.worker_id, a.error) for a in await store.attempts(flaky)]
            assert shown == [(1, "retrying", "w1", "E: once"), (2, "done", "w2", None)]
            for job_id in batch:
                assert [(a.attempt, a.outcome, a.worker_id) for a in await store.attempts(job_id)] == [
                    (1, "done", "w3")
                ]
            return flaky, batch
        finally:
            await store.close()

    flaky, batch = asyncio.run(main())
    assert sql_store.rows(ATTEMPT_ROWS) == [(flaky, 1, "retrying", "w1")]  # the successes: none
    assert sql_store.rows("SELECT id, state, worker_id FROM corral_jobs ORDER BY id") == [
        (flaky, "done", "w2"),
        (batch[0], "done", "w3"),
        (batch[1], "done", "w3"),
    ]


def test_a_done_row_recorded_before_the_migration_is_shown_once(
    sql_store: SqlStoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store migrated while it holds done rows the trigger recorded (before it stopped recording successes):
    each done job shows its done attempt once, whether it ended before the migration or after it."""
    migrations = sql_store.module._MIGRATIONS
    newest = migrations[-1][0]

    async def before_the_migration() -> tuple[int, int]:
        store = sql_store.make()
        await store.migrate()
        await store.open()
        try:
            old, running = await store.enqueue([_job(), _job()])
            claimed = {job.id: job for job in await store.claim("q", 2, "w1")}
            await store.complete([Completion(old, claimed[old].token, None)])
            return old, running
        finally:
            await store.close()

    async def after_the_migration(old: int, running: int) -> None:
        store = sql_store.make()
        assert await store.migrate() == [newest]
        await store.open()
        try:
            job = await store.job(running)
            assert job is not None and (job.state, job.worker_id) == ("running", "w1")
            await store.complete([Completion(running, 1, None)])  # its first claim's token
            for job_id in (old, running):
                assert [(a.attempt, a.outcome, a.worker_id) for a in await store.attempts(job_id)] == [
                    (1, "done", "w1")
                ]
            ended = await store.finished_since(time.time() - 60)
            assert [outcome for _, outcome, _ in ended] == ["done", "done"]
        finally:
            await store.close()

    with monkeypatch.context() as held_back:
        held_back.setattr(sql_store.module, "_MIGRATIONS", migrations[:-1])
        held_back.setattr(sql_store.module, "SCHEMA_VERSION", newest - 1)
        old, running = asyncio.run(before_the_migration())
    assert sql_store.rows(ATTEMPT_ROWS) == [(old, 1, "done", "w1")]  # what the trigger recorded then
    asyncio.run(after_the_migration(old, running))
    assert sql_store.rows(ATTEMPT_ROWS) == [(old, 1, "done", "w1")]  # and nothing since


# -- the wheel ------------------------------------------------------------------------------------


def test_the_wheel_ships_every_sql_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("corral-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".sql")}
    sources = {
        "corral/runtime/" + str(path.relative_to(REPO / "runtime")) for path in (REPO / "runtime").rglob("*.sql")
    }
    assert shipped == sources
    assert "corral/runtime/stores/sqlite/migrations/0002_key_leases_like_postgres.sql" in shipped
    assert "corral/runtime/stores/postgres/migrations/0001_initial.sql" in shipped


# -- a Runtime on memory:// -----------------------------------------------------------------------


def test_a_runtime_on_the_memory_store_runs_enqueued_published_periodic_and_keyed_jobs() -> None:
    index = Queue("index", max_workers=4, timeout=5)
    webhook = Queue("webhook", max_workers=4, timeout=5, per_key=1)
    ran: list[Any] = []
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}

    @index.job("corpus.index", on="note.created")
    async def corpus_index(ctx: JobContext, note_id: int) -> int:
        ran.append(note_id)
        return note_id * 10

    @index.job("flaky", max_attempts=2)
    def flaky(ctx: JobContext) -> str:
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return "second"

    @index.periodic("sessions.prune", every=3600, run_on_start=True)
    async def prune(ctx: JobContext) -> None:
        ran.append("prune")

    @webhook.job("webhook.deliver")
    async def deliver(ctx: JobContext, n: int) -> None:
        key = ctx.key or ""
        in_flight[key] = in_flight.get(key, 0) + 1
        peak[key] = max(peak.get(key, 0), in_flight[key])
        await asyncio.sleep(0.01)
        in_flight[key] -= 1

    runtime = Runtime(
        queues=[index, webhook], store="memory://", relay_interval=0.01, retry_base=0.02, key_busy_snooze=0.02
    )

    async def main() -> None:
        async with runtime:
            job_id = await runtime.enqueue("corpus.index", note_id=7)
            status = await runtime.wait(job_id, timeout=3)
            assert (status.state, status.result) == ("done", 70)
            assert (await runtime.wait(await runtime.enqueue("flaky"), timeout=3)).result == "second"
            await runtime.publish("note.created", {"note_id": 8})
            keyed = [await runtime.enqueue("webhook.deliver", n=n, key=f"ep-{n % 2}") for n in range(8)]
            for job_id in keyed:
                assert (await runtime.wait(job_id, timeout=5)).state == "done"
            deadline = time.monotonic() + 5
            while (await runtime.counts())["index"].done < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert (await runtime.counts())["index"].done == 4
            assert await runtime.failed_jobs() == []

    asyncio.run(main())
    assert sorted(ran, key=str) == [7, 8, "prune"]
    assert peak == {"ep-0": 1, "ep-1": 1}


def test_two_runtimes_sharing_one_memory_store_see_each_others_jobs() -> None:
    queue = Queue("q", max_workers=2, timeout=5, poll=0.05)

    @queue.job("double")
    async def double(ctx: JobContext, n: int) -> int:
        return 2 * n

    store = MemoryStore()
    producer = Runtime(queues=[queue], store=store)
    consumer = Runtime(queues=[queue], store=store)

    async def main() -> None:
        await producer.start(queues=[])
        await consumer.start()
        try:
            job_id = await producer.enqueue("double", n=21)
            assert (await producer.wait(job_id, timeout=3)).result == 42
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(main())
