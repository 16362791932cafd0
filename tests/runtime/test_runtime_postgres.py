"""What only the PostgreSQL store gives: transactional enqueue, schema versions and options, pools the
application owns, LISTEN/NOTIFY against polling, workers in several processes, and a server restart."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import Cli
from corral.runtime import BudgetError, ConfigError, JobContext, Queue, Runtime, StoreUnavailable
from corral.runtime.producer import CLAIM_COALESCE
from corral.runtime.stores.postgres import SCHEMA_VERSION, PostgresStore
from corral.runtime.stores.protocol import Completion, JobFilter, NewJob
from psycopg_pool import AsyncConnectionPool
from runtime_helpers import PostgresBackend, make_runtime


def answer_queue(poll: float = 1.0) -> Queue:
    queue = Queue("q", max_workers=2, timeout=5, poll=poll)

    @queue.job("answer", on="asked")
    async def answer(ctx: JobContext, n: int) -> int:
        return n + 1

    return queue


# -- transactional enqueue and outbox -------------------------------------------------------------


def test_enqueue_and_publish_in_the_callers_transaction(pg: PostgresBackend) -> None:
    runtime = make_runtime(pg, [answer_queue()], relay_interval=0.05)

    async def main() -> None:
        async with runtime, await psycopg.AsyncConnection.connect(pg.url) as conn:
            await conn.execute("CREATE TABLE notes (id int PRIMARY KEY)")
            await conn.commit()
            async with conn.transaction():
                await conn.execute("INSERT INTO notes VALUES (1)")
                kept = await runtime.enqueue("answer", n=1, conn=conn)
                await runtime.publish("asked", {"n": 10}, conn=conn)
                # not visible to anybody before the commit: no worker can have claimed it
                assert pg.rows(f"SELECT id FROM corral_jobs WHERE id = {kept}") == []
            with pytest.raises(RuntimeError, match="oops"):
                async with conn.transaction():
                    await conn.execute("INSERT INTO notes VALUES (2)")
                    lost = await runtime.enqueue("answer", n=2, conn=conn)
                    await runtime.publish("asked", {"n": 20}, conn=conn)
                    raise RuntimeError("oops")
            assert (await runtime.wait(kept, timeout=3)).result == 2
            assert (await runtime.wait(lost, timeout=0.2)).state == "unknown"  # rolled back: never existed
            deadline = time.monotonic() + 5
            while (await runtime.counts())["q"].done < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)

    asyncio.run(main())
    results = sorted(row["result"] for row in pg.rows("SELECT result FROM corral_jobs"))
    assert results == [2, 11]  # the committed job and the committed event's job; nothing of the rollback
    assert pg.scalar("SELECT COUNT(*) FROM corral_events") == 0


def test_conn_must_be_an_async_psycopg_connection(pg: PostgresBackend, tmp_path: Path) -> None:
    async def main(url: str, conn: Any, match: str) -> None:
        async with Runtime(queues=[answer_queue()], store=url) as runtime:
            with pytest.raises(ConfigError, match=match):
                await runtime.enqueue("answer", n=1, conn=conn)
            with pytest.raises(ConfigError, match=match):
                await runtime.publish("asked", {"n": 1}, conn=conn)

    with psycopg.connect(pg.url) as sync_conn:  # a blocking connection would stall the event loop
        asyncio.run(main(pg.url, sync_conn, "psycopg.AsyncConnection"))
    asyncio.run(main(f"sqlite:///{tmp_path / 'jobs.db'}", object(), "needs the PostgreSQL store"))


# -- schema, migrations, names ---------------------------------------------------------------------


def test_open_refuses_an_unmigrated_database_and_migrate_is_idempotent(pg_server: Any) -> None:
    url = pg_server.create_database("m")
    try:

        async def main() -> None:
            with pytest.raises(
                StoreUnavailable, match=rf"version 0, this corral needs {SCHEMA_VERSION}: run `corral migrate"
            ):
                await Runtime(queues=[], store=url).start()
            stores = [PostgresStore(url, max_size=1, min_size=1) for _ in range(3)]
            applied = await asyncio.gather(*(store.migrate() for store in stores))  # concurrent migrators
            assert SCHEMA_VERSION == 6
            assert sorted(applied) == [[], [], [1, 2, 3, 4, 5, 6]]
            assert await stores[0].migrate() == []
            await asyncio.gather(*(store.close() for store in stores))
            async with Runtime(queues=[], store=url) as runtime:
                assert await runtime.counts() == {}

        asyncio.run(main())
        with psycopg.connect(url) as conn:
            versions = conn.execute("SELECT version FROM corral_schema_version ORDER BY version").fetchall()
            assert versions == [(version,) for version in range(1, SCHEMA_VERSION + 1)]
    finally:
        pg_server.drop_database(url)


def test_migrate_cli(pg_server: Any) -> None:
    url = pg_server.create_database("cli")
    try:
        cli = Cli(_UrlBackend(url))
        first = cli.run("migrate", "pgapp:runtime")
        assert first.returncode == 0, first.stderr
        assert "applied schema version(s) 1, 2, 3, 4, 5" in first.stdout
        again = cli.run("migrate", "pgapp:runtime")
        assert again.returncode == 0 and "schema up to date" in again.stdout
        jobs = cli.run("jobs", "pgapp:runtime")
        assert jobs.returncode == 0 and jobs.stdout.splitlines()[1].split() == ["work", *["0"] * 6]
    finally:
        pg_server.drop_database(url)


class _UrlBackend:
    def __init__(self, url: str) -> None:
        self.url = url


def test_schema_and_prefix_keep_stores_apart(pg: PostgresBackend) -> None:
    queue = answer_queue()
    home = pg.scalar("SELECT current_schema()")  # the URL's search_path: this test's own schema

    async def main() -> None:
        stores = [
            PostgresStore(pg.url, schema=f"{home}_a"),
            PostgresStore(pg.url, schema=f"{home}_b", prefix="x_"),
            PostgresStore(pg.url, prefix="y_"),
        ]
        runtimes = [Runtime(queues=[queue], store=store, migrate=True) for store in stores]
        for runtime in runtimes:
            await runtime.start(queues=[])
        try:
            for index, runtime in enumerate(runtimes):
                for _ in range(index + 1):
                    await runtime.enqueue("answer", n=index)
            assert [(await rt.counts())["q"].waiting for rt in runtimes] == [1, 2, 3]
        finally:
            for runtime in runtimes:
                await runtime.stop()

    asyncio.run(main())
    tables = {
        (row["table_schema"], row["table_name"])
        for row in pg.rows(
            "SELECT table_schema, table_name FROM information_schema.tables"
            f" WHERE table_name LIKE '%jobs' AND table_schema LIKE '{home}%'"
        )
    }
    assert tables == {(home, "corral_jobs"), (f"{home}_a", "corral_jobs"), (f"{home}_b", "x_jobs"), (home, "y_jobs")}


@pytest.mark.parametrize(
    "kwargs",
    [{"schema": "Jobs"}, {"schema": 'a"; DROP TABLE x; --'}, {"prefix": "a-b"}, {"prefix": ""}, {"schema": "x" * 31}],
)
def test_schema_and_prefix_names_are_validated(kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="invalid"):
        PostgresStore("postgresql:///nowhere", **kwargs)


def test_unreachable_server_is_store_unavailable(tmp_path: Path) -> None:
    store = PostgresStore(f"postgresql:///x?host={tmp_path}", connect_timeout=1)
    with pytest.raises(StoreUnavailable, match="cannot connect"):
        asyncio.run(Runtime(queues=[], store=store).start())


# -- the application's pool and the budget ---------------------------------------------------------


def test_the_applications_pool_sets_the_budget_and_is_left_open(pg: PostgresBackend) -> None:
    queues = [Queue("index", max_workers=4, timeout=5), Queue("notify", max_workers=2, timeout=5)]

    @queues[0].job("index.one")
    async def index_one(ctx: JobContext) -> str:
        return "indexed"

    async def main() -> None:
        async with AsyncConnectionPool(pg.url, min_size=1, max_size=10, open=False) as pool:
            small = Runtime(queues=queues, store=PostgresStore(pool), max_conns=400)
            with pytest.raises(
                BudgetError, match=r"index 4 \+ notify 2 \+ relay 1 = 7 > 5 \(max_conns 10 x reserve 0.5\)"
            ):
                await small.start()
            runtime = Runtime(queues=queues, store=PostgresStore(pool))
            await runtime.start(queues=["index"])
            job_id = await runtime.enqueue("index.one")
            assert (await runtime.wait(job_id, timeout=3)).result == "indexed"
            await runtime.stop()
            assert not pool.closed  # the application owns it
            async with pool.connection() as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)

    asyncio.run(main())
    assert Runtime(queues=[], store=pg.url, max_conns=12).budget().max_conns == 12  # an owned pool of max_conns


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_pooled_connection_is_committed_and_comes_back_clean_after_a_refused_insert(
    pg: PostgresBackend, autocommit: bool
) -> None:
    """The store takes pooled connections by getconn/putconn: on a borrowed pool's transactional connection
    a job is committed (not rolled back by the pool) and a refused statement is rolled back, so the one
    connection serves the next enqueue; an autocommit connection likewise."""

    def job(text: str, priority: int = 0) -> NewJob:
        return NewJob(
            queue="q",
            kind="k",
            args_json=json.dumps({"text": text}),
            key=None,
            run_at=time.time(),
            max_attempts=1,
            lease_seconds=5.0,
            priority=priority,
        )

    async def main() -> None:
        kwargs = {"autocommit": True} if autocommit else {}
        async with AsyncConnectionPool(pg.url, min_size=1, max_size=1, kwargs=kwargs, open=False) as pool:
            store = PostgresStore(pool)
            await store.open()
            first = await store.enqueue([job("first")])
            with pytest.raises(psycopg.errors.CheckViolation):  # the schema's CHECK refuses priority 7
                await store.enqueue([job("refused", priority=7)])
            second = await store.enqueue([job("second")])
            assert second[0] > first[0]
            async with pool.connection() as conn:  # the pool's only connection, idle and usable
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            await store.close()

    asyncio.run(main())
    texts = [row["args"]["text"] for row in pg.rows("SELECT args FROM corral_jobs ORDER BY id")]
    assert texts == ["first", "second"]  # committed, seen from another connection; nothing of the refused one


def test_claims_keep_their_prepared_plans_once_the_table_has_statistics(pg: PostgresBackend) -> None:
    """With a bound LIMIT, the claims' generic plan guessed a tenth of the table: once ANALYZE had run,
    PostgreSQL planned every claim anew (as long as running it) rather than take a plan that hash-joined
    over a full scan. With the LIMIT a literal per claim size, the prepared claims run their generic plan
    (the claim carrying completions once it carries 6 or more: the generic plan guesses 10 array elements,
    and a custom plan for fewer looks cheaper)."""

    async def main() -> list[tuple[str, int, int]]:
        async with AsyncConnectionPool(pg.url, min_size=1, max_size=1, open=False) as pool:
            store = PostgresStore(pool)
            await store.open()
            now = time.time()
            new = NewJob(queue="q", kind="k", args_json="{}", key=None, run_at=now, max_attempts=1, lease_seconds=30)
            await store.enqueue([new] * 2_000)
            async with pool.connection() as conn:
                await conn.execute("ANALYZE corral_jobs")
            claimed = []
            for _ in range(20):  # psycopg prepares a statement after 5 runs; PostgreSQL weighs plans after 5 more
                claimed = await store.claim("q", 8, "w")
                claimed = await store.claim(
                    "q", 8, "w", completions=[Completion(job.id, job.token, None) for job in claimed]
                )
            assert len(claimed) == 8
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                    " WHERE statement LIKE '%SKIP LOCKED%'"
                )
                plans = await cursor.fetchall()
            await store.close()
            return plans

    plans = asyncio.run(main())
    assert len(plans) == 2, plans  # the claim alone and the claim carrying completions
    for statement, generic, custom in plans:
        assert generic >= 5 and custom <= 5, (generic, custom, statement)


# -- LISTEN/NOTIFY and polling ---------------------------------------------------------------------


@pytest.mark.parametrize("poll_only", [False, True])
def test_jobs_of_another_process_start_at_once_or_within_the_poll(pg: PostgresBackend, poll_only: bool) -> None:
    started: list[float] = []
    poll = 0.5
    queue = Queue("q", max_workers=2, timeout=5, poll=poll)

    @queue.job("stamp")
    async def stamp(ctx: JobContext, at: float) -> None:
        started.append(time.time() - at)

    async def main() -> None:
        producer = Runtime(queues=[queue], store=PostgresStore(pg.url, poll_only=poll_only))
        consumer = Runtime(queues=[queue], store=PostgresStore(pg.url, poll_only=poll_only))
        await producer.start(queues=[])
        await consumer.start()
        try:
            for _ in range(5):
                await asyncio.sleep(0.6)  # idle: the consumer's polling has backed off to `poll`
                job_id = await producer.enqueue("stamp", at=time.time())
                assert (await producer.wait(job_id, timeout=3)).state == "done"
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(main())
    assert len(started) == 5 and max(started) < poll + 0.25
    if not poll_only:
        assert sorted(started)[2] < 0.1  # woken by the notice, not by the poll


def test_waiter_in_another_process_is_woken_by_the_completion_notice(pg: PostgresBackend) -> None:
    queue = answer_queue(poll=0.05)

    async def main() -> None:
        waiter = make_runtime(pg, [queue], notify_fallback=30.0)  # only the notice can answer in time
        worker = make_runtime(pg, [queue])
        await waiter.start(queues=[])
        await worker.start()
        try:
            for n in range(5):
                job_id = await waiter.enqueue("answer", n=n)
                began = time.monotonic()
                status = await waiter.wait(job_id, timeout=3)
                assert (status.state, status.result) == ("done", n + 1)
                assert time.monotonic() - began < 1.0
        finally:
            await worker.stop()
            await waiter.stop()

    asyncio.run(main())


class ClaimLog(PostgresStore):
    """A PostgreSQL store that notes each claim: when it began (monotonic), how many it asked, how many came."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.claims: list[tuple[float, int, int]] = []

    async def claim(self, queue: str, limit: int, worker_id: str, **options: Any) -> Any:
        began = time.monotonic()
        jobs = await super().claim(queue, limit, worker_id, **options)
        self.claims.append((began, limit, len(jobs)))
        return jobs


@contextlib.asynccontextmanager
async def claims_of_another_process(pg: PostgresBackend, queue: Queue) -> AsyncIterator[tuple[Runtime, ClaimLog]]:
    """A runtime that only enqueues, and the claims of a second one working ``queue``."""
    store = ClaimLog(pg.url)
    producer = Runtime(queues=[queue], store=pg.url)
    consumer = Runtime(queues=[queue], store=store)
    await producer.start(queues=[])
    await consumer.start()
    try:
        yield producer, store
    finally:
        await consumer.stop()
        await producer.stop()


def test_a_freed_slot_claims_only_when_there_may_be_more_work(pg: PostgresBackend) -> None:
    """Notices announce every runnable job, so a slot freed after a claim that emptied the queue claims
    nothing (it used to claim once more, empty, after every job); a job announced while every slot was busy
    is claimed as soon as one frees, not at the next poll."""
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    queue = Queue("q", max_workers=2, timeout=5, poll=5.0)  # a poll cannot explain anything below

    @queue.job("hold")
    async def hold(ctx: JobContext, name: str, seconds: float) -> None:
        started[name] = time.monotonic()
        await asyncio.sleep(seconds)
        ended[name] = time.monotonic()

    async def main() -> list[tuple[float, int, int]]:
        async with claims_of_another_process(pg, queue) as (producer, store):
            await asyncio.sleep(0.2)
            store.claims.clear()  # the claim at start
            alone = await producer.enqueue("hold", name="alone", seconds=0.0)
            assert (await producer.wait(alone, timeout=3)).state == "done"
            await asyncio.sleep(0.3)
            one_job = list(store.claims)
            holds = [await producer.enqueue("hold", name=name, seconds=0.4) for name in ("first", "also")]
            while len(started) < 3:
                await asyncio.sleep(0.01)
            last = await producer.enqueue("hold", name="last", seconds=0.0)  # its notice finds no free slot
            for job_id in [*holds, last]:
                assert (await producer.wait(job_id, timeout=3)).state == "done"
        return one_job

    one_job = asyncio.run(main())
    assert [(limit, got) for _, limit, got in one_job] == [(2, 1)]
    assert started["last"] - min(ended["first"], ended["also"]) < 0.3


def test_jobs_arriving_one_by_one_share_claims_at_most_one_per_coalesce_interval(pg: PostgresBackend) -> None:
    """After a claim that emptied the queue the next claim waits until CLAIM_COALESCE after it began, so
    jobs enqueued one call at a time share claims; every job still runs once."""
    ran: list[int] = []
    queue = Queue("q", max_workers=8, timeout=5, poll=5.0)

    @queue.job("note")
    async def note(ctx: JobContext, n: int) -> None:
        ran.append(n)

    async def main() -> list[tuple[float, int, int]]:
        async with claims_of_another_process(pg, queue) as (producer, store):
            ids = [await producer.enqueue("note", n=n) for n in range(60)]
            for job_id in ids:
                assert (await producer.wait(job_id, timeout=5)).state == "done"
        return store.claims

    claims = asyncio.run(main())
    assert sorted(ran) == list(range(60))
    for (began, limit, got), (next_began, _, _) in itertools.pairwise(claims):
        if got < limit:  # it emptied the queue: the next claim waited
            assert next_began - began >= CLAIM_COALESCE
    assert sum(got for _, _, got in claims) == 60


def test_a_cut_listen_connection_reconnects_and_wakes_workers_again(pg: PostgresBackend) -> None:
    """The server ends every LISTEN session (as a failover or an idle-session killer would): each runtime
    reconnects and LISTENs again, and a job of another process starts by its notice, long before the poll."""
    started: list[float] = []
    queue = Queue("q", max_workers=2, timeout=5, poll=5.0)

    @queue.job("stamp")
    async def stamp(ctx: JobContext, at: float) -> None:
        started.append(time.time() - at)

    def listeners() -> list[int]:
        rows = pg.rows("SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()")
        return [row["pid"] for row in rows]

    async def main() -> None:
        async with claims_of_another_process(pg, queue) as (producer, _):
            cut = listeners()
            assert len(cut) == 2
            with psycopg.connect(pg.url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (cut,))
            deadline = time.monotonic() + 5
            while (len(listeners()) < 2 or set(listeners()) & set(cut)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(listeners()) == 2 and not set(listeners()) & set(cut)
            await asyncio.sleep(0.3)  # the look everywhere each reconnect makes is over
            for _ in range(3):
                job_id = await producer.enqueue("stamp", at=time.time())
                assert (await producer.wait(job_id, timeout=3)).state == "done"

    asyncio.run(main())
    assert len(started) == 3 and max(started) < 1.0  # woken by notices; the poll is 5 s


# -- several processes -----------------------------------------------------------------------------


def _enqueue(url: str, kind: str, args: list[dict[str, Any]], *, queue: str, key: Any = None) -> None:
    """Insert jobs in batches straight through the store (test setup, not the code under test)."""

    async def main() -> None:
        store = PostgresStore(url, max_size=2, min_size=1)
        await store.open()
        try:
            for start in range(0, len(args), 2000):
                await store.enqueue(
                    [
                        NewJob(
                            queue=queue,
                            kind=kind,
                            args_json=json.dumps(a),
                            key=key(a) if key else None,
                            run_at=time.time(),
                            max_attempts=5,
                            lease_seconds=7.0,
                        )
                        for a in args[start : start + 2000]
                    ]
                )
        finally:
            await store.close()

    asyncio.run(main())


def _stop(workers: list[subprocess.Popen[Any]]) -> list[int | None]:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for worker in workers:
        try:
            codes.append(worker.wait(timeout=15))
        except subprocess.TimeoutExpired:
            worker.kill()
            codes.append(None)
    return codes


def _wait_done(pg: PostgresBackend, total: int, seconds: float) -> dict[str, int]:
    deadline = time.monotonic() + seconds
    counts = pg.state_counts()
    while counts.get("done", 0) < total and time.monotonic() < deadline:
        time.sleep(0.2)
        counts = pg.state_counts()
    return counts


def test_twenty_thousand_jobs_four_processes_exactly_once(pg: PostgresBackend, tmp_path: Path) -> None:
    total = 20_000
    log = tmp_path / "done.txt"
    cli = Cli(pg)
    workers = [cli.start_worker("pgapp:runtime", "--queues", "work", CORRAL_TEST_LOG=str(log)) for _ in range(4)]
    try:
        began = time.monotonic()
        _enqueue(pg.url, "noop", [{"n": n} for n in range(total)], queue="work")
        counts = _wait_done(pg, total, 50)
        elapsed = time.monotonic() - began
    finally:
        codes = _stop(workers)
    assert counts == {"done": total}, counts
    assert codes == [0, 0, 0, 0]
    runs = collections.Counter(int(line) for line in log.read_text().split())
    assert len(runs) == total and set(runs.values()) == {1}  # each job ran exactly once
    print(f"20,000 jobs through 4 processes in {elapsed:.1f}s")


def test_per_key_one_in_flight_across_four_processes(pg: PostgresBackend, tmp_path: Path) -> None:
    total, keys = 120, 4
    log = tmp_path / "keyed.txt"
    cli = Cli(pg)
    workers = [cli.start_worker("pgapp:runtime", "--queues", "keyed", CORRAL_TEST_LOG=str(log)) for _ in range(4)]
    try:
        _enqueue(
            pg.url, "keyed.step", [{"n": n} for n in range(total)], queue="keyed", key=lambda a: f"ep-{a['n'] % keys}"
        )
        counts = _wait_done(pg, total, 40)
    finally:
        _stop(workers)
    assert counts == {"done": total}, counts
    spans: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for line in log.read_text().splitlines():
        key, start, end, _ = line.split()
        spans[key].append((float(start), float(end)))
    assert sum(map(len, spans.values())) == total
    for key, runs in spans.items():
        runs.sort()
        for (_, previous_end), (start, _) in itertools.pairwise(runs):
            assert start >= previous_end, f"two jobs of {key} in flight at once"


def test_sigterm_drains_running_jobs_within_grace(pg: PostgresBackend, tmp_path: Path) -> None:
    log = tmp_path / "slow.txt"
    cli = Cli(pg)
    worker = cli.start_worker("pgapp:runtime", "--queues", "slow", CORRAL_TEST_LOG=str(log), CORRAL_TEST_GRACE="3")
    try:
        _enqueue(pg.url, "slow.step", [{"n": n, "seconds": 0.8} for n in range(6)], queue="slow")
        deadline = time.monotonic() + 10
        while pg.state_counts().get("running", 0) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        began = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=10) == 0
        assert time.monotonic() - began < 3
    finally:
        if worker.poll() is None:
            worker.kill()
    # the four running jobs finished during the grace; the two never claimed still wait
    assert pg.state_counts() == {"done": 4, "waiting": 2}
    assert log.read_text().count("end") == 4


def test_server_restart_under_running_workers(pg_server: Any, pg: PostgresBackend, tmp_path: Path) -> None:
    total = 400
    log = tmp_path / "steps.txt"
    cli = Cli(pg)
    workers = [cli.start_worker("crashapp:runtime", "--queues", "work", CORRAL_TEST_LOG=str(log)) for _ in range(2)]
    try:
        _enqueue(pg.url, "crash.step", [{"n": n} for n in range(total)], queue="work")
        while pg.state_counts().get("done", 0) < total // 4:
            time.sleep(0.05)
        pg_server.restart()  # every connection of every worker is cut mid-flight
        counts = _wait_done(pg, total, 40)
        _enqueue(pg.url, "crash.step", [{"n": total}], queue="work")
        after = _wait_done(pg, total + 1, 10)
    finally:
        codes = _stop(workers)
    assert counts == {"done": total}, counts  # nothing lost, nothing left running
    assert after == {"done": total + 1}
    assert codes == [0, 0]
    ran = {int(line.split()[0]) for line in log.read_text().splitlines()}
    assert ran == set(range(total + 1))


def test_open_existing_read_only_keeps_the_urls_options_and_refuses_writes(pg: PostgresBackend) -> None:
    async def main() -> None:
        store = PostgresStore(pg.url, max_size=2, min_size=1)
        await store.open_existing(read_only=True)
        try:
            assert await store.list_jobs(JobFilter()) == []  # the URL's search_path still holds: the schema was found
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await store.enqueue([NewJob("q", "k", "{}", None, time.time(), 1, 30.0)])
        finally:
            await store.close()

    asyncio.run(main())


def test_open_existing_refuses_a_database_without_the_schema(pg_server: Any) -> None:
    url = pg_server.create_database("bare")
    try:
        with pytest.raises(StoreUnavailable, match="the schema is at version 0, this corral needs"):
            asyncio.run(PostgresStore(url, max_size=1, min_size=1).open_existing(read_only=True))
    finally:
        pg_server.drop_database(url)


def test_open_existing_of_a_missing_database_says_so_at_once(pg_server: Any) -> None:
    # `corral jobs` with a URL naming no database: the server's own words, not a pool that retries for
    # its whole connect timeout.
    store = PostgresStore(pg_server.url("no_such_database"), max_size=1, min_size=1, connect_timeout=10)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match='database "no_such_database" does not exist'):
        asyncio.run(store.open_existing(read_only=True))
    assert time.monotonic() - started < 5
