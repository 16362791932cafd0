"""The SQLite store: the embedded default implementation of :class:`~corral.runtime.stores.protocol.Store`.

Owns the SQLite connection, the schema's versioned migrations (``migrations/*.sql``, recorded in
``corral_schema_version`` and applied on open) and the statements of this package's ``*.sql``
files. A database created before versions were recorded (it has the tables but no version row) is
at version 1 and is upgraded in place. All calls run on one dedicated store thread (see
:mod:`corral.runtime.infra.threads`), each as one short transaction. Several processes may
share the database file: WAL mode lets readers run beside the writer, every write starts with
``BEGIN IMMEDIATE`` (so two claimers serialise instead of failing on a stale snapshot), and
``busy_timeout`` makes a process wait for the write lock instead of erroring.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from corral.runtime.errors import ConfigError, StoreUnavailable
from corral.runtime.infra import StoreThread
from corral.runtime.payloads import UnstorableJson
from corral.runtime.stores.protocol import (
    DONE,
    FAILED,
    RETRYING,
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

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

log = logging.getLogger("corral.runtime")

T = TypeVar("T")

_SQL = read_queries("corral.runtime.stores.sqlite")
_MIGRATIONS = read_migrations("corral.runtime.stores.sqlite")
SCHEMA_VERSION = _MIGRATIONS[-1][0]


def _plain_columns(job: NewJob, now: float) -> tuple[Any, ...]:
    """The values of ``insert_job.sql`` for ``job`` (``insert_unique_job.sql`` takes two more)."""
    return (*job.leading_values(), job.run_at, now, None, job.priority)


def _path_from_url(url: str) -> str:
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise StoreUnavailable(f"not a sqlite URL: {url!r} (expected sqlite:///relative.db or sqlite:////abs.db)")
    path = url[len(prefix) :]
    if not path:
        raise StoreUnavailable(f"sqlite URL {url!r} names no file")
    return path


class SqliteStore:
    """SQLite (WAL) job store. ``SqliteStore(path="var/jobs.db")`` or ``SqliteStore.from_url(url)``.

    The parent directory must exist: the store never creates directories, so a typo in a path
    is an error at start instead of a fresh, empty database somewhere unexpected.
    """

    def __init__(self, *, path: str | Path, busy_timeout: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._clock = clock
        self._thread = StoreThread(name=f"corral-store:{Path(self.path).name}")
        self._conn: sqlite3.Connection | None = None
        self._applied: list[int] = []  # the migrations the last open applied
        self._on_jobs: Callable[[str | None], None] | None = None
        # Jobs whose key slot this store's claim took and whose executor has not asked for it yet;
        # a settled job leaves (its slot is released by holder or expires with its lease).
        self._leased_by_claim: set[int] = set()

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        return cls(path=_path_from_url(url))

    def __repr__(self) -> str:
        return f"SqliteStore(path={self.path!r})"

    @property
    def pool_size(self) -> int | None:
        return None  # one connection, no pool: the boot check uses Runtime(max_conns=...)

    def watch(
        self,
        *,
        on_jobs: Callable[[str | None], None],
        on_finished: Callable[[Sequence[int]], None],
        on_events: Callable[[], None],
    ) -> bool:
        # SQLite cannot push: other processes' work (and the slots they free) is found by polling.
        # A slot freed by this runtime wakes its own claim loops.
        self._on_jobs = on_jobs
        return False

    @staticmethod
    def _no_foreign_conn(conn: Any) -> None:
        if conn is not None:
            raise ConfigError("conn=... (enqueue inside your own transaction) needs the PostgreSQL store")

    # -- plumbing -------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StoreUnavailable(f"store {self.path!r} is not open")
        try:
            return await self._thread.call(lambda: fn(conn))
        except sqlite3.OperationalError as exc:
            # locked past busy_timeout, disk full, read-only, I/O error: the store, not the call, is at fault
            raise StoreUnavailable(f"sqlite store {self.path!r} is unavailable: {exc}") from exc

    @staticmethod
    @contextmanager
    def _write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite store {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
            self._prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot use sqlite store {self.path!r}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """WAL mode and the schema (migrated to :data:`SCHEMA_VERSION`). Two processes opening a new
        store at once can find it locked without SQLite's busy handler waiting (switching to WAL
        takes the lock at once), so a locked store is retried until the busy timeout is spent."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreUnavailable(f"sqlite store {self.path!r} refused WAL mode (got {mode!r})")
                # NORMAL is durable across application crashes in WAL mode; only an OS crash can lose
                # the last commits, which at-least-once delivery tolerates.
                conn.execute("PRAGMA synchronous = NORMAL")
                with self._write(conn):
                    self._applied = self._migrate_schema(conn)
                if self._applied:
                    log.info("%s: schema migrated to version %d (applied %s)", self, SCHEMA_VERSION, self._applied)
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _migrate_schema(self, conn: sqlite3.Connection) -> list[int]:
        """Apply the migrations the database lacks, inside the caller's write transaction (so
        processes opening the file together migrate it once, one after another)."""
        conn.execute(_SQL["version_table"])
        current = int(conn.execute(_SQL["version"]).fetchone()[0])
        if current == 0 and conn.execute(_SQL["unversioned_schema"]).fetchone() is not None:
            current = 1  # created by a store that recorded no versions: its schema is migration 1
            conn.execute(_SQL["record_version"], (current, self._clock()))
        if current > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{self}: the schema is at version {current}, newer than this corral knows ({SCHEMA_VERSION})"
            )
        applied: list[int] = []
        for version, migration in _MIGRATIONS:
            if version > current:
                for statement in split_statements(migration):
                    conn.execute(statement)
                conn.execute(_SQL["record_version"], (version, self._clock()))
                applied.append(version)
        return applied

    async def migrate(self) -> list[int]:
        """The schema is migrated on open; return the versions that applied (none when the store was
        already open)."""
        if self._conn is not None:
            return []
        await self.open()
        return list(self._applied)

    async def open(self) -> None:
        await self._open_with(self._connect)

    async def _open_with(self, connect: Callable[[], sqlite3.Connection]) -> None:
        if self._conn is not None:
            return
        self._thread.start()
        try:
            self._conn = await self._thread.call(connect)
        except BaseException:
            await self._thread.stop()
            raise

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._thread.call(conn.close)
        await self._thread.stop()

    # -- jobs -----------------------------------------------------------------------------------

    @staticmethod
    def _insert(conn: sqlite3.Connection, job: NewJob, now: float) -> Enqueued:
        """Insert one job inside the caller's write transaction; a unique key already held answers its
        holder (the write lock keeps the holder from changing in between)."""
        plain = _plain_columns(job, now)
        if job.unique_key is None:  # the plain path: no unique columns, no conflict to look for
            return Enqueued(conn.execute(_SQL["insert_job"], plain).lastrowid or 0)
        unique = (job.unique_key, unique_states_text(job.unique_states))
        cur = conn.execute(_SQL["insert_unique_job"], plain + unique)
        if cur.rowcount == 1:
            return Enqueued(cur.lastrowid or 0)
        (holder,) = conn.execute(_SQL["unique_holder"], (job.unique_key,)).fetchone()
        return Enqueued.of_holder(int(holder))

    @staticmethod
    def _insert_plain(conn: sqlite3.Connection, jobs: Sequence[NewJob], now: float) -> list[Enqueued]:
        """Insert jobs without a unique key in one ``executemany`` inside the caller's write transaction. Under
        the write lock nothing else inserts, and AUTOINCREMENT gives each row the id after the one before: the
        ids are the ``len(jobs)`` ending at the last one inserted, in the order of ``jobs``."""
        conn.executemany(_SQL["insert_job"], [_plain_columns(job, now) for job in jobs])
        (last,) = conn.execute(_SQL["last_job_id"]).fetchone()
        return [Enqueued(job_id) for job_id in range(last - len(jobs) + 1, last + 1)]

    async def enqueue(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[Enqueued]:
        self._no_foreign_conn(conn)
        now = self._clock()

        def insert(conn: sqlite3.Connection) -> list[Enqueued]:
            with self._write(conn):
                # One job is one execute (its lastrowid), a batch of plain jobs one executemany.
                if len(jobs) > 1 and all(job.unique_key is None for job in jobs):
                    return self._insert_plain(conn, jobs, now)
                return [self._insert(conn, job, now) for job in jobs]

        return await self._run(insert)

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
        self._leased_by_claim.difference_update(attempt_holder(c.job_id, c.token) for c in completions)

        def claim(conn: sqlite3.Connection) -> list[ClaimedJob]:
            now = self._clock()
            if not completions and conn.execute(_SQL["any_runnable"], (queue, now)).fetchone() is None:
                return []
            with self._write(conn):
                if completions:  # riding along: settled in the claim's transaction, one thread hop for both
                    self._complete_in(conn, completions, now)
                if per_key is None:
                    rows = conn.execute(_SQL["claim"], (worker_id, now, now, queue, now, limit)).fetchall()
                else:
                    rows = self._claim_with_key_slots(conn, queue, limit, worker_id, per_key, now)
            jobs = [claimed_job(queue, row) for row in rows]
            jobs.sort(key=lambda job: job.claim_order)
            return jobs

        try:
            jobs = await self._run(claim)
        except (sqlite3.DataError, UnicodeEncodeError) as exc:
            raise UnstorableJson(f"was refused by the SQLite store: {exc}") from exc
        self._leased_by_claim.update(
            attempt_holder(job.id, job.token) for job in jobs if per_key is not None and job.key is not None
        )
        return jobs

    @staticmethod
    def _claim_with_key_slots(
        conn: sqlite3.Connection, queue: str, limit: int, worker_id: str, per_key: int, now: float
    ) -> list[Any]:
        """Claim up to ``limit`` jobs, each keyed one with a free slot of its key taken for it. The write
        lock is held from the first read to the last write, so no other process takes those slots."""
        # Jobs of keys whose slots this claim fills are skipped too: read a few more than ``limit``.
        candidates = conn.execute(_SQL["claim_keyed_candidates"], (queue, now, now, per_key, 2 * limit)).fetchall()
        free_slots: dict[str, list[int]] = {}
        chosen: list[int] = []
        for job_id, key, lease_seconds, claims in candidates:
            if len(chosen) == limit:
                break
            if key is not None:
                if key not in free_slots:
                    busy = {row[0] for row in conn.execute(_SQL["claim_key_slots"], (queue, key, now))}
                    free_slots[key] = [slot for slot in range(per_key) if slot not in busy]
                if not free_slots[key]:
                    continue
                slot = free_slots[key].pop(0)
                # The slot's holder is the attempt this claim starts (its token is the claim count after it).
                holder = attempt_holder(job_id, claims + 1)
                conn.execute(_SQL["claim_key_slot"], (queue, key, slot, holder, now + lease_seconds))
            chosen.append(job_id)
        if not chosen:
            return []
        return conn.execute(_SQL["claim_ids"], (worker_id, now, now, json.dumps(chosen))).fetchall()

    async def complete(self, completions: Sequence[Completion]) -> None:
        if not completions:
            return

        self._leased_by_claim.difference_update(attempt_holder(c.job_id, c.token) for c in completions)

        def complete(conn: sqlite3.Connection) -> None:
            with self._write(conn):
                self._complete_in(conn, completions, self._clock())

        try:
            await self._run(complete)
        except (sqlite3.DataError, UnicodeEncodeError) as exc:
            raise UnstorableJson(f"was refused by the SQLite store: {exc}") from exc

    @staticmethod
    def _complete_in(conn: sqlite3.Connection, completions: Sequence[Completion], now: float) -> None:
        """complete.sql for each completion, in the caller's write transaction."""
        conn.executemany(_SQL["complete"], [(c.result_json, now, c.job_id, c.token) for c in completions])

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        if not job_ids:
            return []

        def cancel(conn: sqlite3.Connection) -> set[int]:
            with self._write(conn):
                rows = conn.execute(_SQL["cancel"], (self._clock(), json.dumps([int(i) for i in job_ids]))).fetchall()
            return {int(row[0]) for row in rows}

        cancelled = await self._run(cancel)
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

        def fail(conn: sqlite3.Connection) -> bool:
            now = self._clock()
            final = retry_at is None
            with self._write(conn):
                cur = conn.execute(
                    _SQL["fail"],
                    (
                        FAILED if final else RETRYING,
                        now if final else retry_at,
                        error,
                        traceback,
                        now if final else None,
                        int(crashed),
                        job_id,
                        token,
                    ),
                )
            return cur.rowcount == 1

        return await self._run(fail)

    def _unclaim(
        self, job_id: int, token: int, seconds: float, *, retried: bool = False
    ) -> Callable[[sqlite3.Connection], None]:
        self._leased_by_claim.discard(attempt_holder(job_id, token))

        def unclaim(conn: sqlite3.Connection) -> None:
            now = self._clock()
            with self._write(conn):
                conn.execute(_SQL["unclaim"], (now + seconds, int(retried), job_id, token))

        return unclaim

    async def snooze(self, job_id: int, token: int, *, seconds: float, retried: bool = False) -> None:
        await self._run(self._unclaim(job_id, token, seconds, retried=retried))

    async def release(self, job_id: int, token: int) -> None:
        await self._run(self._unclaim(job_id, token, 0.0))

    async def rescue_expired(self, *, crash_kinds: Sequence[str] = ()) -> int:
        def rescue(conn: sqlite3.Connection) -> int:
            now = self._clock()
            with self._write(conn):
                if crash_kinds:
                    conn.execute(_SQL["rescue_crashes"], (now, json.dumps(list(crash_kinds))))
                cur = conn.execute(_SQL["rescue"], (FAILED, RETRYING, now, now, now))
                return cur.rowcount

        return await self._run(rescue)

    # -- key leases -----------------------------------------------------------------------------

    async def acquire_key_lease(self, queue: str, key: str, *, holder: int, limit: int, seconds: float) -> bool:
        if holder in self._leased_by_claim:
            self._leased_by_claim.discard(holder)
            return True  # the claim took this job's slot a moment ago, for the job's whole lease

        def acquire(conn: sqlite3.Connection) -> bool:
            now = self._clock()
            with self._write(conn):
                for slot in range(limit):
                    cur = conn.execute(_SQL["lease_take"], (queue, key, slot, holder, now + seconds, now))
                    if cur.rowcount == 1:
                        return True
            return False

        return await self._run(acquire)

    async def release_key_lease(self, queue: str, key: str, *, holder: int) -> None:
        def release(conn: sqlite3.Connection) -> int:
            with self._write(conn):
                return conn.execute(_SQL["lease_release"], (queue, key, holder)).rowcount

        self._leased_by_claim.discard(holder)
        if await self._run(release) and self._on_jobs is not None:
            self._on_jobs(queue)  # a freed slot: this runtime's claim loop looks at once

    async def renew(self, job_id: int, token: int, *, seconds: float, key: tuple[str, str] | None) -> bool:
        def renew(conn: sqlite3.Connection) -> bool:
            until = self._clock() + seconds
            with self._write(conn):
                renewed = conn.execute(_SQL["renew"], (until, job_id, token)).rowcount == 1
                if key is not None:
                    conn.execute(_SQL["lease_renew"], (until, key[0], key[1], attempt_holder(job_id, token)))
            return renewed

        return await self._run(renew)

    def renew_blocking(self, leases: Sequence[HeldLease]) -> None:
        with self._blocking_write() as (conn, now):
            for lease in leases:
                conn.execute(_SQL["renew"], (now + lease.seconds, lease.job_id, lease.token))
                if lease.key is not None:
                    holder = attempt_holder(lease.job_id, lease.token)
                    conn.execute(_SQL["lease_renew"], (now + lease.seconds, lease.key[0], lease.key[1], holder))

    def release_blocking(self, leases: Sequence[HeldLease]) -> int:
        released = 0
        with self._blocking_write() as (conn, now):
            for lease in leases:
                released += conn.execute(_SQL["unclaim"], (now, 0, lease.job_id, lease.token)).rowcount
                if lease.key is not None:
                    holder = attempt_holder(lease.job_id, lease.token)
                    conn.execute(_SQL["lease_release"], (lease.key[0], lease.key[1], holder))
        return released

    @contextmanager
    def _blocking_write(self) -> Iterator[tuple[sqlite3.Connection, float]]:
        """One write transaction, and its time, on a connection of its own: the store's connection belongs
        to the store thread, and these calls come from another while job code holds the event loop."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite store {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
            with self._write(conn):
                yield conn, self._clock()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"sqlite store {self.path!r} is unavailable: {exc}") from exc
        finally:
            conn.close()

    # -- events ---------------------------------------------------------------------------------

    async def publish(self, topic: str, payload_json: str, *, conn: Any = None) -> int:
        self._no_foreign_conn(conn)

        def publish(conn: sqlite3.Connection) -> int:
            with self._write(conn):
                cur = conn.execute(_SQL["publish"], (topic, payload_json, self._clock()))
                return int(cur.lastrowid or 0)

        return await self._run(publish)

    async def relay(self, routes: Mapping[str, Sequence[Route]], *, limit: int) -> RelayPass:
        def relay(conn: sqlite3.Connection) -> RelayPass:
            now = self._clock()
            created = 0
            with self._write(conn):
                # The write lock is held from the SELECT to the DELETE, so two relays (in any
                # process) can never take the same row: each event is relayed exactly once.
                rows = conn.execute(_SQL["relay_take"], (limit,)).fetchall()
                for job in routed_jobs(rows, routes):
                    route = job.route
                    cur = conn.execute(
                        _SQL["insert_event_job"],
                        (
                            route.queue,
                            route.kind,
                            job.payload_json,
                            None,
                            route.max_attempts,
                            route.lease_seconds,
                            now,
                            now,
                            job.event_id,
                        ),
                    )
                    created += cur.rowcount
                conn.executemany(_SQL["relay_delete"], [(row[0],) for row in rows])
            return RelayPass(events=len(rows), jobs=created)

        return await self._run(relay)

    async def schedule_periodic(self, specs: Sequence[PeriodicSpec]) -> list[int]:
        if not specs:
            return []

        def schedule(conn: sqlite3.Connection) -> list[int]:
            now = self._clock()
            ids: list[int] = []
            with self._write(conn):
                for spec in specs:
                    row = conn.execute(_SQL["periodic_next"], (spec.kind,)).fetchone()
                    if row is None:
                        due = spec.run_on_start
                        conn.execute(_SQL["periodic_new"], (spec.kind, now + spec.every))
                    else:
                        due = row[0] <= now
                        if due:
                            conn.execute(_SQL["periodic_due"], (now + spec.every, spec.kind))
                    if due:
                        ids.append(self._insert(conn, periodic_job(spec, now), now))
            return ids

        return await self._run(schedule)

    # -- inspection -----------------------------------------------------------------------------

    async def counts(self) -> dict[str, QueueCounts]:
        def counts(conn: sqlite3.Connection) -> dict[str, QueueCounts]:
            return queue_counts(conn.execute(_SQL["counts"]))

        return await self._run(counts)

    async def failed(self, *, limit: int = 50) -> list[FailedJob]:
        def failed(conn: sqlite3.Connection) -> list[FailedJob]:
            rows = conn.execute(_SQL["failed"], (limit,)).fetchall()
            return [failed_job(row) for row in rows]

        return await self._run(failed)

    async def job_states(self, job_ids: Sequence[int]) -> dict[int, JobState]:
        ids = list(job_ids)

        def states(conn: sqlite3.Connection) -> dict[int, JobState]:
            found: dict[int, JobState] = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                for row in conn.execute(_SQL["states"].format(marks=",".join("?" * len(chunk))), chunk):
                    found[row[0]] = JobState(id=row[0], queue=row[1], state=row[2], result_json=row[3], error=row[4])
            return found

        return await self._run(states)

    async def prune_done(self, *, older_than: float) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with self._write(conn):
                cur = conn.execute(_SQL["prune"], (DONE, self._clock() - older_than))
                return cur.rowcount

        return await self._run(prune)

    # -- operating ------------------------------------------------------------------------------

    async def open_existing(self, *, read_only: bool) -> None:
        await self._open_with(lambda: self._connect_existing(read_only))

    def _connect_existing(self, read_only: bool) -> sqlite3.Connection:
        """A connection to the file as it is (``mode=ro`` or ``rw``: SQLite itself refuses to create
        it), at this corral's schema version."""
        path = Path(self.path).resolve()
        if not path.is_file():
            raise StoreUnavailable(
                f"no SQLite store at {path}: it is never created to be inspected "
                "(run from the service's folder, or create it with `corral migrate MODULE:RUNTIME`)"
            )
        try:
            conn = sqlite3.connect(
                f"{path.as_uri()}?mode={'ro' if read_only else 'rw'}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite store {str(path)!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
            version = int(conn.execute(_SQL["version"]).fetchone()[0])
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"{path} is not a corral store: {exc}") from exc
        if version != SCHEMA_VERSION:
            conn.close()
            raise StoreUnavailable(
                f"{self}: the schema is at version {version}, this corral needs {SCHEMA_VERSION}: "
                "run `corral migrate MODULE:RUNTIME`"
            )
        return conn

    async def _select_jobs(self, where: JobFilter, job_id: int | None = None) -> list[JobRecord]:
        filters = {**dataclasses.asdict(where), "id": job_id}
        return await self._run(lambda conn: [job_record(row) for row in conn.execute(_SQL["job_list"], filters)])

    async def list_jobs(self, where: JobFilter) -> list[JobRecord]:
        return await self._select_jobs(where)

    async def job(self, job_id: int) -> JobRecord | None:
        found = await self._select_jobs(JobFilter(limit=1), job_id)
        return found[0] if found else None

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        return await self._run(
            lambda conn: [attempt_record(row) for row in conn.execute(_SQL["attempt_list"], {"id": job_id})]
        )

    async def key_leases(self) -> list[KeyLease]:
        return await self._run(
            lambda conn: [KeyLease(*row) for row in conn.execute(_SQL["key_lease_list"], (self._clock(),))]
        )

    async def finished_since(self, since: float) -> list[tuple[str, str, float]]:
        return await self._run(
            lambda conn: [(row[0], row[1], row[2]) for row in conn.execute(_SQL["finished_since"], {"since": since})]
        )

    async def retry_failed(self, job_ids: Sequence[int] | None, *, queue: str | None = None) -> list[int]:
        ids = None if job_ids is None else json.dumps(list(job_ids))

        def retry(conn: sqlite3.Connection) -> list[int]:
            with self._write(conn):
                rows = conn.execute(_SQL["retry_failed"], {"now": self._clock(), "ids": ids, "queue": queue})
                return sorted(int(row[0]) for row in rows)

        return await self._run(retry)

    async def purge(self, *, states: Sequence[str], older_than: float) -> int:
        check_final_states(states)

        def purge(conn: sqlite3.Connection) -> int:
            with self._write(conn):
                return conn.execute(_SQL["purge"], (json.dumps(list(states)), self._clock() - older_than)).rowcount

        return await self._run(purge)
