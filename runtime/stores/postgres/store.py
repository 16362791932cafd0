"""The PostgreSQL store: :class:`~corral.runtime.stores.protocol.Store` for workers across processes and hosts.

Owns the PostgreSQL schema and its versioned migrations (``migrations/*.sql``), the statements of
this package's ``*.sql`` files, the connection pool (its own, or one the application passes in) and
the one LISTEN connection per process that turns notices of other processes into wake-ups. Claims
use ``FOR UPDATE SKIP LOCKED``; every call is one short transaction on a pooled connection,
returned at once: no transaction or connection is held across a job's work. Times are the server's
(``now()``), so hosts with skewed clocks agree on leases; the runtime's absolute times are turned
into offsets from the caller's clock.

Table, index, schema and channel names are the only interpolated SQL (the ``{name}`` slots of the
``.sql`` files): ``schema`` and ``prefix`` are validated against a strict pattern and quoted with
:class:`psycopg.sql.Identifier`; every value is a bound parameter (``%s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from corral.runtime.errors import ConfigError, StoreUnavailable
from corral.runtime.infra import spawn, wait_event
from corral.runtime.payloads import UnstorableJson
from corral.runtime.stores.protocol import (
    CLAIM_SPAN,
    AttemptRecord,
    ClaimedJob,
    Completion,
    Enqueued,
    FailedJob,
    HeldLease,
    JobFilter,
    JobRecord,
    JobState,
    KeyLease,
    NewJob,
    PeriodicSpec,
    QueueCounts,
    RelayPass,
    Route,
    attempt_holder,
    attempt_record,
    check_final_states,
    claimed_job,
    failed_job,
    job_record,
    periodic_job,
    queue_counts,
    routed_jobs,
    unique_states_text,
)
from corral.runtime.stores.sqlfiles import read_migrations, read_queries, split_statements
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

log = logging.getLogger("corral.runtime")

# Short enough that "<schema>.<prefix>notices" and "<prefix>jobs_runnable" stay under 63 bytes.
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,29}$")
PREFIX_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,19}$")

# Completion notices carry job ids; a NOTIFY payload must stay under 8000 bytes.
_IDS_PER_NOTICE = 400

_SQL = read_queries("corral.runtime.stores.postgres")
_MIGRATIONS = read_migrations("corral.runtime.stores.postgres")
SCHEMA_VERSION = _MIGRATIONS[-1][0]

# Statements with a slot of their own (the schema to create, the channel to LISTEN on), composed where used.
_ONE_OFF = frozenset({"create_schema", "listen"})
# The plain claims, whose LIMIT is a literal composed in per claim size (at most the queue's max_workers
# texts, each prepared once per connection): with a bound LIMIT, a generic plan guesses a tenth of the
# table, so once the table has statistics PostgreSQL either plans each claim anew (0.3 ms of the server's
# time, as long as the claim itself) or, with a generic plan, hash-joins the claim over a full scan. (A claim
# carrying fewer than about 6 completions is still planned anew: its arrays' length is a guess in a generic
# plan, 10, and a custom plan for fewer looks cheaper.)
_PER_LIMIT = frozenset({"claim", "claim_completing"})

# Schema-qualified names (the tables, and the attempts trigger's function) and the names that are not
# (indexes and triggers live beside their table).
_TABLES = ("jobs", "events", "key_leases", "periodic", "schema_version", "attempts", "record_attempt")
_INDEXES = (
    "jobs_runnable",
    "jobs_leased",
    "jobs_finished",
    "jobs_event",
    "jobs_unique",
    "attempts_job",
    "attempts_finished",
    "attempts_record",
)
# How often one enqueue looks for the holders of its duplicates: a holder that left its unique states
# between the insert and the look frees its key, and the job is inserted on the next pass instead.
_UNIQUE_PASSES = 5

# A pooled connection's cursor is kept for the next statement unless its last result had more rows.
_KEPT_ROWS = 64


class PostgresStore:
    """PostgreSQL job store. ``PostgresStore("postgresql://...")`` owns a pool of ``max_size``
    connections; ``PostgresStore(pool)`` borrows from a :class:`psycopg_pool.AsyncConnectionPool` the
    application already owns (and opens and closes itself), so jobs share its budget.

    ``schema`` puts the tables in that schema (created by :meth:`migrate`); ``prefix`` names them
    (``corral_jobs``, ...). ``poll_only=True`` opens no LISTEN connection (PgBouncer in transaction
    mode cannot LISTEN) and turns off server-side prepared statements on an owned pool; workers then
    find other processes' jobs by polling.
    """

    def __init__(
        self,
        source: str | AsyncConnectionPool[Any],
        /,
        *,
        schema: str | None = None,
        prefix: str = "corral_",
        poll_only: bool = False,
        max_size: int = 40,
        min_size: int = 2,
        connect_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if schema is not None and (not isinstance(schema, str) or not SCHEMA_PATTERN.fullmatch(schema)):
            raise ConfigError(f"invalid schema name {schema!r}: must match {SCHEMA_PATTERN.pattern}")
        if not isinstance(prefix, str) or not PREFIX_PATTERN.fullmatch(prefix):
            raise ConfigError(f"invalid table prefix {prefix!r}: must match {PREFIX_PATTERN.pattern}")
        self.schema = schema
        self.prefix = prefix
        self.poll_only = poll_only
        self._clock = clock
        self._connect_timeout = connect_timeout
        if isinstance(source, AsyncConnectionPool):
            self._pool = source
            self._owns_pool = False
            self._label = f"pool {source.name!r}"
        elif isinstance(source, str) and source.startswith(("postgresql://", "postgres://")):
            if not 1 <= min_size <= max_size:
                raise ConfigError(f"need 1 <= min_size <= max_size, got min_size={min_size}, max_size={max_size}")
            kwargs: dict[str, Any] = {"autocommit": True}
            if poll_only:
                kwargs["prepare_threshold"] = None  # PgBouncer's transaction mode has no session to prepare in
            self._pool = AsyncConnectionPool(
                source,
                kwargs=kwargs,
                min_size=min_size,
                max_size=max_size,
                open=False,
                timeout=connect_timeout,
                name="corral",
            )
            self._owns_pool = True
            self._label = _redact(source)
        else:
            raise ConfigError(
                f"PostgresStore needs a postgresql:// URL or a psycopg_pool.AsyncConnectionPool, got {source!r}"
            )
        names = {name: self._table(name) for name in _TABLES}
        names.update({name: sql.Identifier(prefix + name) for name in _INDEXES})
        names["qualified_jobs_runnable"] = self._table("jobs_runnable")  # DROP INDEX needs its schema
        names["jobs_state_check"] = sql.Identifier(prefix + "jobs_state_check")  # 0001's unnamed CHECK, as named
        self._names = names
        self._sql = {key: self._compose(template) for key, template in _SQL.items() if key not in _ONE_OFF | _PER_LIMIT}
        self._limited: dict[tuple[str, int], bytes] = {}  # (_PER_LIMIT statement, limit) -> its text
        self.channel = f"{schema}.{prefix}notices" if schema else f"{prefix}notices"
        self._on_jobs: Callable[[str | None], None] | None = None
        self._on_finished: Callable[[Sequence[int]], None] | None = None
        self._on_events: Callable[[], None] | None = None
        self._listener: asyncio.Task[None] | None = None
        # Jobs whose key slot this store's claim took and whose executor has not asked for it yet;
        # a settled job leaves (its slot is released by holder or expires with its lease).
        self._leased_by_claim: set[int] = set()
        self._cursors: dict[int, psycopg.AsyncCursor[tuple[Any, ...]]] = {}  # see _reusable_cursor
        self._open = False

    @classmethod
    def from_url(cls, url: str, *, max_size: int = 40) -> PostgresStore:
        return cls(url, max_size=max_size)

    def __repr__(self) -> str:
        where = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresStore({self._label}{where}, prefix={self.prefix!r})"

    def _table(self, name: str) -> sql.Identifier:
        if self.schema:
            return sql.Identifier(self.schema, self.prefix + name)
        return sql.Identifier(self.prefix + name)

    def _compose(self, template: str, **more: sql.Composable) -> bytes:
        return sql.SQL(template).format(**self._names, **more).as_bytes(None)

    def _with_limit(self, name: str, limit: int) -> bytes:
        """The ``_PER_LIMIT`` statement ``name`` with ``LIMIT limit`` (an int, composed as a literal)."""
        text = self._limited.get((name, limit))
        if text is None:
            text = self._limited[name, limit] = self._compose(_SQL[name], limit=sql.Literal(int(limit)))
        return text

    @property
    def pool_size(self) -> int:
        return self._pool.max_size

    def watch(
        self,
        *,
        on_jobs: Callable[[str | None], None],
        on_finished: Callable[[Sequence[int]], None],
        on_events: Callable[[], None],
    ) -> bool:
        self._on_jobs, self._on_finished, self._on_events = on_jobs, on_finished, on_events
        return not self.poll_only

    # -- connections ----------------------------------------------------------------------------

    async def _open_pool(self) -> None:
        if not self._owns_pool:
            if self._pool.closed:
                raise StoreUnavailable(f"{self}: the pool you pass must be open (await pool.open())")
            return
        if not self._pool.closed:
            return
        try:
            await self._pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            await self._pool.close()
            raise StoreUnavailable(f"cannot connect to the PostgreSQL store {self._label}: {exc}") from exc

    def _cursor(self, conn: Any = None) -> _PooledCursor:
        """A tuple-row cursor on ``conn`` (the caller's, inside its transaction) or on a pooled
        connection returned as soon as the block ends."""
        return _PooledCursor(self, conn, transaction=False)

    def _transaction(self) -> _PooledCursor:
        """A cursor on a pooled connection inside one transaction, committed when the block ends."""
        return _PooledCursor(self, None, transaction=True)

    def _reusable_cursor(self, pooled: psycopg.AsyncConnection[Any]) -> psycopg.AsyncCursor[tuple[Any, ...]]:
        """The cursor this store keeps on the pooled connection ``pooled``, made on first use. A fresh
        cursor per statement cost 17 us of every enqueue's client CPU (its transformer and the lookup
        of every parameter's dumper start over); the connection is used by one caller at a time, and so
        is its cursor."""
        cursor = self._cursors.get(id(pooled))
        if cursor is None or cursor.connection is not pooled or cursor.closed:
            if len(self._cursors) >= 2 * self._pool.max_size:  # connections the pool has closed since
                self._cursors = {key: kept for key, kept in self._cursors.items() if not kept.connection.closed}
            cursor = self._cursors[id(pooled)] = pooled.cursor(row_factory=tuple_row)
        return cursor

    async def _returned(
        self, pooled: psycopg.AsyncConnection[Any], cursor: psycopg.AsyncCursor[tuple[Any, ...]]
    ) -> None:
        """Forget ``cursor`` when its rows would stay in memory until the connection's next statement
        (a listing's page) or when its connection is gone; any other stays for the next caller."""
        result = cursor.pgresult
        if pooled.broken or pooled.closed or (result is not None and result.ntuples > _KEPT_ROWS):
            self._cursors.pop(id(pooled), None)
            await cursor.close()

    # -- schema ---------------------------------------------------------------------------------

    async def migrate(self) -> list[int]:
        await self._open_pool()
        applied: list[int] = []
        async with self._transaction() as cur:
            await cur.execute(self._sql["migrate_lock"], (f"corral:{self.channel}",))
            if self.schema:
                await cur.execute(self._compose(_SQL["create_schema"], schema=sql.Identifier(self.schema)))
            await cur.execute(self._sql["version_table"])
            current = await self._version(cur)
            for version, migration in _MIGRATIONS:
                if version > current:
                    for statement in split_statements(migration):
                        await cur.execute(self._compose(statement))
                    await cur.execute(self._sql["record_version"], (version,))
                    applied.append(version)
        if applied:
            log.info("%s: schema migrated to version %d (applied %s)", self, SCHEMA_VERSION, applied)
        return applied

    async def _version(self, cur: psycopg.AsyncCursor[tuple[Any, ...]]) -> int:
        await cur.execute(self._sql["version"])
        row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{self}: the schema is at version {version}, newer than this corral knows ({SCHEMA_VERSION})"
            )
        return version

    async def schema_version(self) -> int:
        """The schema version in the database (0: none)."""
        try:
            async with self._cursor() as cur:
                return await self._version(cur)
        except psycopg.errors.UndefinedTable:
            return 0

    async def open(self) -> None:
        if self._open:
            return
        await self._open_checked("run `corral migrate MODULE:RUNTIME` or start with Runtime(..., migrate=True)")
        listen = not self.poll_only and self._on_jobs is not None
        try:
            conninfo, kwargs = self._listen_params() if listen else ("", {})
        except ConfigError:
            await self._close_pool()
            raise
        self._open = True
        if listen:
            listening = asyncio.Event()  # made here: it belongs to this event loop
            self._listener = spawn(self._listen(conninfo, kwargs, listening), name=f"corral:listen:{self.channel}")
            # Notices sent before LISTEN runs would be lost; polling covers a slow start.
            await wait_event(listening, self._connect_timeout)

    async def _open_checked(self, remedy: str) -> None:
        """Open the pool and check the schema is this corral's version (``remedy``: what to do if not)."""
        await self._open_pool()
        try:
            version = await self.schema_version()
        except (psycopg.Error, StoreUnavailable) as exc:
            await self._close_pool()
            raise StoreUnavailable(f"cannot use the PostgreSQL store {self}: {exc}") from exc
        if version != SCHEMA_VERSION:
            await self._close_pool()
            raise StoreUnavailable(
                f"{self}: the schema is at version {version}, this corral needs {SCHEMA_VERSION}: {remedy}"
            )

    async def _close_pool(self) -> None:
        if self._owns_pool:
            await self._pool.close()

    async def close(self) -> None:
        self._open = False
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        await self._close_pool()

    # -- the LISTEN connection ------------------------------------------------------------------

    def _listen_params(self) -> tuple[str, dict[str, Any]]:
        """Where the LISTEN connection goes: the pool's own conninfo and connection arguments."""
        conninfo, kwargs = self._pool.conninfo, self._pool.kwargs or {}
        if not isinstance(conninfo, str) or not isinstance(kwargs, dict):
            raise ConfigError(
                f"{self}: LISTEN needs the pool's conninfo and kwargs as plain values (not callables); "
                "or use poll_only=True"
            )
        return conninfo, {**kwargs, "autocommit": True, "connect_timeout": max(1, int(self._connect_timeout))}

    async def _listen(self, conninfo: str, kwargs: dict[str, Any], listening: asyncio.Event) -> None:
        """One dedicated connection outside the pool, per process: notices fan out to the runtime."""
        delay = 0.05
        connected_before = False
        while self._open:
            try:
                conn = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                log.warning("%s: LISTEN connection failed (%s); retrying in %.2gs", self, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            try:
                # Notices that arrive with LISTEN's own answer are read by psycopg: its handler gets them.
                conn.add_notify_handler(lambda notice: self._dispatch(notice.payload))
                await conn.execute(self._compose(_SQL["listen"], channel=sql.Identifier(self.channel)))
                listening.set()
                delay = 0.05
                if connected_before and self._on_jobs is not None:
                    self._on_jobs(None)  # notices sent while we were away are lost: look everywhere once
                connected_before = True
                await self._receive(conn)
            except psycopg.Error as exc:
                log.warning("%s: LISTEN connection lost (%s); reconnecting", self, exc)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _receive(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Dispatch the LISTEN connection's notices as its socket delivers them, until it breaks (raises
        psycopg.Error). A reader on the socket, not ``conn.notifies()``: that registers and unregisters the
        socket with the event loop for every packet, a sixth of the CPU of a worker whose jobs arrive one
        by one."""
        loop = asyncio.get_running_loop()
        broken: asyncio.Future[None] = loop.create_future()
        pgconn = conn.pgconn
        encoding = conn.info.encoding
        socket = pgconn.socket

        def readable() -> None:
            try:
                pgconn.consume_input()
                while (notice := pgconn.notifies()) is not None:
                    self._dispatch(notice.extra.decode(encoding))
            except psycopg.Error as exc:
                loop.remove_reader(socket)
                if not broken.done():
                    broken.set_exception(exc)

        loop.add_reader(socket, readable)
        try:
            readable()  # what psycopg read past LISTEN's answer waits in libpq's buffer, not on the socket
            await broken
        finally:
            loop.remove_reader(socket)

    def _dispatch(self, payload: str) -> None:
        what, _, rest = payload.partition(" ")
        try:
            if what == "j" and self._on_jobs is not None:
                self._on_jobs(rest)
            elif what == "f" and self._on_finished is not None:
                self._on_finished([int(part) for part in rest.split(",") if part])
            elif what == "e" and self._on_events is not None:
                self._on_events()
        except Exception:
            log.exception("%s: handling notice %r failed", self, payload)

    # -- jobs -----------------------------------------------------------------------------------

    @staticmethod
    def _values(job: NewJob, event_id: int | None, now: float) -> tuple[Any, ...]:
        """One job's values in the order both insert statements (and ``insert_one.sql``) take them."""
        return (*job.leading_values(), job.run_at - now, event_id, job.priority)

    def _columns(self, jobs: Sequence[NewJob], event_ids: Sequence[int | None]) -> tuple[list[Any], ...]:
        """The bound arrays both insert statements start with, one element per job."""
        now = self._clock()
        rows = [self._values(job, event_id, now) for job, event_id in zip(jobs, event_ids, strict=True)]
        return tuple(list(column) for column in zip(*rows, strict=True))

    async def _insert_plain(
        self, cur: psycopg.AsyncCursor[tuple[Any, ...]], jobs: Sequence[NewJob], event_ids: Sequence[int | None]
    ) -> list[int]:
        """One statement inserting ``jobs``, none with a unique key (no unique columns sent, no unique index
        checked but the relay's); the ids of the rows inserted, in the order of ``jobs`` (a relayed event's
        job made before is missing)."""
        if len(jobs) == 1:  # its values as scalars: one-element arrays cost a third of an enqueue
            values = self._values(jobs[0], event_ids[0], self._clock())
            await cur.execute(self._sql["insert_one"], (*values, self.channel))
            return [int(row[0]) for row in await cur.fetchall()]
        await cur.execute(self._sql["insert"], (*self._columns(jobs, event_ids), self.channel))
        # Identities are drawn in insertion order, which is the order of ``jobs``.
        return sorted(int(row[0]) for row in await cur.fetchall())

    async def _insert_unique(
        self, cur: psycopg.AsyncCursor[tuple[Any, ...]], jobs: Sequence[NewJob]
    ) -> list[tuple[int, str | None]]:
        """One statement inserting ``jobs``, some with a unique key; the ``(id, unique_key)`` of the rows
        inserted, in the order of ``jobs`` (rows whose key another job holds are missing)."""
        unique_states = [None if job.unique_key is None else unique_states_text(job.unique_states) for job in jobs]
        columns = (*self._columns(jobs, [None] * len(jobs)), [job.unique_key for job in jobs], unique_states)
        await cur.execute(self._sql["insert_unique"], (*columns, self.channel))
        return sorted((int(row[0]), row[1]) for row in await cur.fetchall())

    async def enqueue(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[Enqueued]:
        if not jobs:
            return []
        if all(job.unique_key is None for job in jobs):  # the plain path: one statement, every job inserted
            async with self._cursor(conn) as cur:
                return [Enqueued(job_id) for job_id in await self._insert_plain(cur, jobs, [None] * len(jobs))]
        answers: list[Enqueued | None] = [None] * len(jobs)
        first_with_key: dict[str, int] = {}  # a key twice in the batch: the later ones are its duplicates
        pending: list[int] = []
        for index, job in enumerate(jobs):
            if job.unique_key is not None and job.unique_key in first_with_key:
                continue
            if job.unique_key is not None:
                first_with_key[job.unique_key] = index
            pending.append(index)
        # One job, or a batch without unique keys, is one autocommitted statement (a pass that inserts
        # nothing leaves nothing behind); a batch with them shares one transaction across its passes
        # (yours with ``conn``), so a batch refused at the last pass leaves nothing behind either.
        alone = conn is not None or not first_with_key or len(jobs) == 1
        one_transaction = self._cursor(conn) if alone else self._transaction()
        async with one_transaction as cur:
            for _ in range(_UNIQUE_PASSES):
                # Unique keys in key order: concurrent batches then wait for each other's keys in one
                # order, never in a cycle (a deadlock); jobs without one keep theirs, ahead of them.
                pending.sort(key=lambda index: jobs[index].unique_key or "")
                batch = [jobs[index] for index in pending]
                inserted = await self._insert_unique(cur, batch)
                keys_inserted = {key for _, key in inserted if key is not None}
                # Rows without a key are always inserted; of the others, those whose key came back.
                landed = [i for i in pending if jobs[i].unique_key is None or jobs[i].unique_key in keys_inserted]
                for index, (job_id, _) in zip(landed, inserted, strict=True):
                    answers[index] = Enqueued(job_id)
                held = {i: jobs[i].unique_key for i in pending if answers[i] is None}
                if not held:
                    break
                await cur.execute(self._sql["unique_holders"], (list(held.values()),))
                holders = {key: int(job_id) for key, job_id in await cur.fetchall()}
                for index, key in held.items():
                    if key in holders:
                        answers[index] = Enqueued.of_holder(holders[key])
                pending = [index for index in pending if answers[index] is None]
                if not pending:
                    break
            else:
                raise StoreUnavailable(
                    f"{self}: {len(pending)} unique job(s) found their key held and then free again "
                    f"{_UNIQUE_PASSES} times in a row; nothing is inserted for them, enqueue them again"
                )
        for index, job in enumerate(jobs):
            if answers[index] is None and job.unique_key is not None:
                holder = answers[first_with_key[job.unique_key]]
                assert holder is not None
                answers[index] = Enqueued.of_holder(holder)
        return [answer for answer in answers if answer is not None]

    async def claim(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        *,
        per_key: int | None = None,
        completions: Sequence[Completion] = (),
    ) -> list[ClaimedJob]:
        if limit < 1:
            await self.complete(completions)
            return []
        if completions and (per_key is not None or len(completions) > _IDS_PER_NOTICE):
            # Only a plain claim carries completions in its statement (one notice's worth of ids): the
            # others take the two statements in one transaction, all or none as well.
            async with self._transaction() as cur:
                await self._complete_on(cur, completions)
                return await self._claim_on(cur, queue, limit, worker_id, per_key)
        async with self._cursor() as cur:
            return await self._claim_on(cur, queue, limit, worker_id, per_key, completions)

    async def _claim_on(
        self,
        cur: psycopg.AsyncCursor[tuple[Any, ...]],
        queue: str,
        limit: int,
        worker_id: str,
        per_key: int | None,
        completions: Sequence[Completion] = (),
    ) -> list[ClaimedJob]:
        """The claim's statement on ``cur``; ``completions`` (a plain claim's, at most a notice's worth)
        are recorded by the same statement."""
        if completions:
            self._forget_leases(completions)
            params = (*self._completion_columns(completions), self.channel, worker_id, queue)
            try:
                await cur.execute(self._with_limit("claim_completing", limit), params)
            except (psycopg.DataError, UnicodeEncodeError) as exc:
                raise UnstorableJson(f"was refused by the PostgreSQL store: {exc}") from exc
            rows = [row for row in await cur.fetchall() if row[0] is not None]
        elif per_key is None:
            await cur.execute(self._with_limit("claim", limit), (worker_id, queue))
            rows = await cur.fetchall()
        else:
            # Jobs of keys whose slots this claim fills are skipped too: look at a few more than ``limit``.
            keyed = {
                "queue": queue,
                "per_key": per_key,
                "limit": limit,
                "scan": 2 * limit,
                "worker": worker_id,
                "span": CLAIM_SPAN,
            }
            await cur.execute(self._sql["claim_keyed"], keyed)
            rows = await cur.fetchall()
        jobs = [claimed_job(queue, row) for row in rows]
        jobs.sort(key=lambda job: job.claim_order)
        if per_key is not None:
            self._leased_by_claim.update(attempt_holder(job.id, job.token) for job in jobs if job.key is not None)
        return jobs

    def _forget_leases(self, completions: Sequence[Completion]) -> None:
        """Settled jobs no longer wait for the key slot their claim leased (only per_key claims lease)."""
        if self._leased_by_claim:
            self._leased_by_claim.difference_update(attempt_holder(c.job_id, c.token) for c in completions)

    @staticmethod
    def _completion_columns(completions: Sequence[Completion]) -> tuple[list[int], list[int], list[str | None]]:
        """The bound arrays of complete.sql and claim_completing.sql: ids, claim tokens, results."""
        return (
            # plain ints: psycopg refuses a list mixing Enqueued ids (an int subclass) and ints
            [int(c.job_id) for c in completions],
            [c.token for c in completions],
            [c.result_json for c in completions],
        )

    async def complete(self, completions: Sequence[Completion]) -> None:
        if not completions:
            return
        async with self._cursor() as cur:
            await self._complete_on(cur, completions)

    async def _complete_on(self, cur: psycopg.AsyncCursor[tuple[Any, ...]], completions: Sequence[Completion]) -> None:
        self._forget_leases(completions)
        try:
            if len(completions) == 1:
                one = completions[0]
                params = (one.result_json, int(one.job_id), one.token, self.channel)
                await cur.execute(self._sql["complete_one"], params)
                return
            for start in range(0, len(completions), _IDS_PER_NOTICE):
                chunk = completions[start : start + _IDS_PER_NOTICE]
                await cur.execute(self._sql["complete"], (*self._completion_columns(chunk), self.channel))
        except (psycopg.DataError, UnicodeEncodeError) as exc:
            raise UnstorableJson(f"was refused by the PostgreSQL store: {exc}") from exc

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []
        async with self._cursor() as cur:
            await cur.execute(self._sql["cancel"], ([int(job_id) for job_id in job_ids], self.channel))
            cancelled = {int(row[0]) for row in await cur.fetchall()}
        return [int(job_id) for job_id in job_ids if job_id in cancelled]

    async def fail(
        self,
        job_id: int,
        token: int,
        *,
        error: str,
        traceback: str | None,
        retry_at: float | None,
        crashed: bool = False,
    ) -> bool:
        self._leased_by_claim.discard(attempt_holder(job_id, token))
        final = retry_at is None
        delay = 0.0 if retry_at is None else retry_at - self._clock()
        async with self._cursor() as cur:
            await cur.execute(
                self._sql["fail"],
                (
                    "failed" if final else "retrying",
                    delay,
                    error,
                    traceback,
                    final,
                    int(crashed),
                    job_id,
                    token,
                    final,
                    self.channel,
                ),
            )
            row = await cur.fetchone()
        return row is not None and int(row[0]) == 1

    async def _unclaim(self, job_id: int, token: int, seconds: float, *, retried: bool = False) -> None:
        self._leased_by_claim.discard(attempt_holder(job_id, token))
        async with self._cursor() as cur:
            await cur.execute(self._sql["unclaim"], (seconds, int(retried), job_id, token, self.channel, seconds <= 0))

    async def snooze(self, job_id: int, token: int, *, seconds: float, retried: bool = False) -> None:
        await self._unclaim(job_id, token, seconds, retried=retried)

    async def release(self, job_id: int, token: int) -> None:
        await self._unclaim(job_id, token, 0.0)

    async def rescue_expired(self, *, crash_kinds: Sequence[str] = ()) -> int:
        async with self._transaction() as cur:
            if crash_kinds:  # one transaction, one now(): the jobs counted are the jobs rescued
                await cur.execute(self._sql["rescue_crashes"], (list(crash_kinds),))
            await cur.execute(self._sql["rescue"])
            rows = await cur.fetchall()
            notices = [f"j {queue}" for queue in sorted({row[1] for row in rows if row[2] == "retrying"})]
            failed = [str(row[0]) for row in rows if row[2] == "failed"]
            for start in range(0, len(failed), _IDS_PER_NOTICE):
                notices.append("f " + ",".join(failed[start : start + _IDS_PER_NOTICE]))
            for notice in notices:
                await cur.execute(self._sql["notify"], (self.channel, notice))
        return len(rows)

    # -- key leases -----------------------------------------------------------------------------

    async def acquire_key_lease(self, queue: str, key: str, *, holder: int, limit: int, seconds: float) -> bool:
        if holder in self._leased_by_claim:
            self._leased_by_claim.discard(holder)
            return True  # the claim took this job's slot a moment ago, for the job's whole lease
        async with self._transaction() as cur:
            # The key's rows first (no-op once they exist), then take a free slot, in one short
            # transaction: rows it made are not yet visible to the pruner, which deletes free rows, so it
            # cannot delete them between the two statements (it did: a free key refused its lease).
            await cur.execute(self._sql["lease_rows"], (queue, key, limit))
            await cur.execute(self._sql["lease_take"], (holder, seconds, queue, key, limit, holder))
            return await cur.fetchone() is not None

    async def release_key_lease(self, queue: str, key: str, *, holder: int) -> None:
        self._leased_by_claim.discard(holder)
        async with self._cursor() as cur:
            # The notice wakes every process's claim loop, this one's too (polling when poll_only).
            await cur.execute(self._sql["lease_release"], (queue, key, holder, self.channel))

    async def renew(self, job_id: int, token: int, *, seconds: float, key: tuple[str, str] | None) -> bool:
        async with self._transaction() as cur:
            await cur.execute(self._sql["renew"], (seconds, job_id, token))
            renewed = cur.rowcount == 1
            if key is not None:
                await cur.execute(self._sql["lease_renew"], (seconds, key[0], key[1], attempt_holder(job_id, token)))
        return renewed

    def renew_blocking(self, leases: Sequence[HeldLease]) -> None:
        with self._blocking_transaction() as cur:
            for lease in leases:
                cur.execute(self._sql["renew"], (lease.seconds, lease.job_id, lease.token))
                if lease.key is not None:
                    holder = attempt_holder(lease.job_id, lease.token)
                    cur.execute(self._sql["lease_renew"], (lease.seconds, lease.key[0], lease.key[1], holder))

    def release_blocking(self, leases: Sequence[HeldLease]) -> int:
        released = 0
        with self._blocking_transaction() as cur:
            for lease in leases:
                cur.execute(self._sql["unclaim"], (0.0, 0, lease.job_id, lease.token, self.channel, True))
                row = cur.fetchone()
                released += int(row[0]) if row is not None else 0
                if lease.key is not None:
                    holder = attempt_holder(lease.job_id, lease.token)
                    cur.execute(self._sql["lease_release"], (lease.key[0], lease.key[1], holder, self.channel))
        return released

    @contextlib.contextmanager
    def _blocking_transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction on a short-lived sync connection outside the pool: the pool's connections belong
        to the event loop, which job code holds when this is called (opened as the LISTEN connection is)."""
        conninfo, kwargs = self._listen_params()
        try:
            with psycopg.connect(conninfo, **kwargs) as conn, conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise StoreUnavailable(f"the PostgreSQL store {self} is unavailable: {exc}") from exc

    # -- events ---------------------------------------------------------------------------------

    async def publish(self, topic: str, payload_json: str, *, conn: Any = None) -> int:
        async with self._cursor(conn) as cur:
            await cur.execute(self._sql["publish"], (topic, payload_json, self.channel))
            row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    async def relay(self, routes: Mapping[str, Sequence[Route]], *, limit: int) -> RelayPass:
        async with self._transaction() as cur:
            await cur.execute(self._sql["relay_take"], (limit,))
            events = await cur.fetchall()
            if not events:
                return RelayPass(events=0, jobs=0)
            routed = routed_jobs(events, routes)
            jobs = [
                NewJob(
                    queue=job.route.queue,
                    kind=job.route.kind,
                    args_json=job.payload_json,
                    key=None,
                    run_at=self._clock(),
                    max_attempts=job.route.max_attempts,
                    lease_seconds=job.route.lease_seconds,
                )
                for job in routed
            ]
            created = await self._insert_plain(cur, jobs, [job.event_id for job in routed]) if jobs else []
        return RelayPass(events=len(events), jobs=len(created))

    async def schedule_periodic(self, specs: Sequence[PeriodicSpec]) -> list[int]:
        if not specs:
            return []
        due: list[PeriodicSpec] = []
        async with self._transaction() as cur:
            for spec in specs:
                # The row's insert or its due update succeeds in exactly one process per period.
                await cur.execute(self._sql["periodic_new"], (spec.kind, spec.every))
                if await cur.fetchone() is not None:
                    if spec.run_on_start:
                        due.append(spec)
                    continue
                await cur.execute(self._sql["periodic_due"], (spec.every, spec.kind))
                if await cur.fetchone() is not None:
                    due.append(spec)
            if not due:
                return []
            now = self._clock()
            jobs = [periodic_job(spec, now) for spec in due]
            return await self._insert_plain(cur, jobs, [None] * len(jobs))

    # -- inspection -----------------------------------------------------------------------------

    async def counts(self) -> dict[str, QueueCounts]:
        async with self._cursor() as cur:
            await cur.execute(self._sql["counts"])
            return queue_counts(await cur.fetchall())

    async def failed(self, *, limit: int = 50) -> list[FailedJob]:
        async with self._cursor() as cur:
            await cur.execute(self._sql["failed"], (limit,))
            return [failed_job(row) for row in await cur.fetchall()]

    async def job_states(self, job_ids: Sequence[int]) -> dict[int, JobState]:
        if not job_ids:
            return {}
        async with self._cursor() as cur:
            await cur.execute(self._sql["states"], ([int(job_id) for job_id in job_ids],))
            return {
                row[0]: JobState(id=row[0], queue=row[1], state=row[2], result_json=row[3], error=row[4])
                for row in await cur.fetchall()
            }

    async def prune_done(self, *, older_than: float) -> int:
        async with self._cursor() as cur:
            await cur.execute(self._sql["prune"], (older_than,))
            pruned = cur.rowcount
            await cur.execute(self._sql["prune_leases"])
        return pruned

    # -- operating ------------------------------------------------------------------------------

    async def open_existing(self, *, read_only: bool) -> None:
        if self._open:
            return
        if read_only and self._owns_pool and self._pool.closed:
            # The server refuses every write of these sessions (beside the URL's own options, such as a
            # search_path); a borrowed pool is the application's to configure.
            kwargs = self._pool.kwargs if isinstance(self._pool.kwargs, dict) else {}
            options = conninfo_to_dict(str(self._pool.conninfo), **kwargs).get("options") or ""
            self._pool.kwargs = {**kwargs, "options": f"{options} -c default_transaction_read_only=on".strip()}
        if self._owns_pool and self._pool.closed:
            await self._probe_connection()
        await self._open_checked("run `corral migrate MODULE:RUNTIME`")
        self._open = True

    async def _probe_connection(self) -> None:
        """One connection before the pool's, for the operator's commands: a server that refuses it (no such
        database, a wrong password) is an error at once with the server's own words, where the pool would
        retry it for its whole connect timeout and log each try."""
        kwargs = self._pool.kwargs if isinstance(self._pool.kwargs, dict) else {}
        params = {"connect_timeout": max(1, math.ceil(self._connect_timeout)), **kwargs}
        try:
            probe = await psycopg.AsyncConnection.connect(str(self._pool.conninfo), **params)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to the PostgreSQL store {self._label}: {exc}") from exc
        await probe.close()

    async def _fetch(self, name: str, params: Any) -> list[tuple[Any, ...]]:
        async with self._cursor() as cur:
            await cur.execute(self._sql[name], params)
            return await cur.fetchall()

    async def _select_jobs(self, where: JobFilter, job_id: int | None = None) -> list[JobRecord]:
        filters = {**dataclasses.asdict(where), "id": job_id}
        return [job_record(row) for row in await self._fetch("job_list", filters)]

    async def list_jobs(self, where: JobFilter) -> list[JobRecord]:
        return await self._select_jobs(where)

    async def job(self, job_id: int) -> JobRecord | None:
        found = await self._select_jobs(JobFilter(limit=1), job_id)
        return found[0] if found else None

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        return [attempt_record(row) for row in await self._fetch("attempt_list", {"id": int(job_id)})]

    async def key_leases(self) -> list[KeyLease]:
        return [KeyLease(*row) for row in await self._fetch("key_lease_list", ())]

    async def finished_since(self, since: float) -> list[tuple[str, str, float]]:
        return [(row[0], row[1], row[2]) for row in await self._fetch("finished_since", {"since": since})]

    async def retry_failed(self, job_ids: Sequence[int] | None, *, queue: str | None = None) -> list[int]:
        ids = None if job_ids is None else [int(job_id) for job_id in job_ids]
        rows = await self._fetch("retry_failed", {"ids": ids, "queue": queue, "channel": self.channel})
        return sorted(int(row[0]) for row in rows)

    async def purge(self, *, states: Sequence[str], older_than: float) -> int:
        check_final_states(states)
        async with self._cursor() as cur:
            await cur.execute(self._sql["purge"], (list(states), older_than))
            return cur.rowcount


class _PooledCursor:
    """``PostgresStore._cursor`` and ``_transaction``: a class, not an ``asynccontextmanager``, whose
    generator costs 2 us more on every statement. On the caller's ``conn`` a new cursor, its
    OperationalError said as StoreUnavailable; otherwise a pooled connection (its kept cursor) returned
    at the end, committed or rolled back when it is not in autocommit (a borrowed pool's) or when the
    block is a transaction. getconn/putconn, not the pool's connection(): on an autocommit connection
    (an owned pool's always) its commit or rollback does nothing, and its nested context managers cost
    ~10 us of every single enqueue. putconn still discards a broken connection."""

    __slots__ = ("_conn", "_cursor", "_pooled", "_store", "_transaction", "_tx")

    def __init__(self, store: PostgresStore, conn: Any, *, transaction: bool) -> None:
        self._store = store
        self._conn = conn
        self._transaction = transaction
        self._pooled: psycopg.AsyncConnection[Any] | None = None
        self._cursor: psycopg.AsyncCursor[tuple[Any, ...]] | None = None
        self._tx: contextlib.AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> psycopg.AsyncCursor[tuple[Any, ...]]:
        store, conn = self._store, self._conn
        if conn is not None:
            if not isinstance(conn, psycopg.AsyncConnection):
                raise ConfigError(f"conn must be a psycopg.AsyncConnection, got {type(conn).__name__}")
            self._cursor = conn.cursor(row_factory=tuple_row)
            return self._cursor
        pool = store._pool
        if pool.closed:
            raise StoreUnavailable(f"store {store} is not open")
        try:
            pooled = self._pooled = await pool.getconn()
        except psycopg.OperationalError as exc:
            raise await self._unavailable(exc) from exc
        try:
            cursor = self._cursor = store._reusable_cursor(pooled)
            if self._transaction or not pooled.autocommit:
                # transaction() on an autocommit connection is BEGIN..COMMIT; on a borrowed pool's
                # transactional one it is the transaction, committed at the end, rolled back on error.
                self._tx = pooled.transaction()
                await self._tx.__aenter__()
        except BaseException as exc:
            await pool.putconn(pooled)
            if isinstance(exc, psycopg.OperationalError):
                raise await self._unavailable(exc) from exc
            raise
        return cursor

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        store, cursor = self._store, self._cursor
        assert cursor is not None
        if self._conn is not None:
            await cursor.close()
            if isinstance(exc, psycopg.OperationalError):
                raise StoreUnavailable(
                    f"the PostgreSQL store {store} is unavailable on your connection: {exc}"
                ) from exc
            return
        pooled = self._pooled
        assert pooled is not None
        try:
            if self._tx is not None:  # it swallows only psycopg.Rollback, which the store never raises
                await self._tx.__aexit__(kind, exc, tb)
        except psycopg.OperationalError as failed:
            raise await self._unavailable(failed) from failed
        finally:
            await store._returned(pooled, cursor)
            await store._pool.putconn(pooled)
        if isinstance(exc, psycopg.OperationalError):
            raise await self._unavailable(exc) from exc

    async def _unavailable(self, exc: psycopg.OperationalError) -> StoreUnavailable:
        # A restarted server breaks every pooled connection at once: drop the dead idle ones
        # now instead of failing once per connection.
        with contextlib.suppress(Exception):
            await self._store._pool.check()
        return StoreUnavailable(f"the PostgreSQL store {self._store} is unavailable: {exc}")


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)
