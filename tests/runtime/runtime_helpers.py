"""Plain helpers shared by the runtime tests (imported by name: tests/runtime is on sys.path).

A :class:`Backend` is one store under test: its URL, and direct reads of its tables (the tests check
what is really stored, through the database's own driver, not through the store being tested).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from corral.runtime import Queue, Runtime
from corral.runtime.stores.postgres import PostgresStore
from psycopg.rows import dict_row


class Backend:
    kind: str
    url: str

    def rows(self, query: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def scalar(self, query: str) -> Any:
        (row,) = self.rows(query)
        return next(iter(row.values()))

    def job_row(self, job_id: int) -> dict[str, Any]:
        (row,) = self.rows(f"SELECT * FROM corral_jobs WHERE id = {int(job_id)}")
        return row

    def state_counts(self) -> dict[str, int]:
        return {
            row["state"]: row["n"] for row in self.rows("SELECT state, COUNT(*) AS n FROM corral_jobs GROUP BY state")
        }

    def __repr__(self) -> str:
        return f"<{self.kind} {self.url}>"


class SqliteBackend(Backend):
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"

    def rows(self, query: str) -> list[dict[str, Any]]:
        conn = sqlite3.connect(self.path)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(query).fetchall()]
        finally:
            conn.close()


class PostgresBackend(Backend):
    kind = "postgresql"

    def __init__(self, url: str, *, server: Any) -> None:
        self.url = url
        self.server = server
        asyncio.run(_migrate(url))

    def rows(self, query: str) -> list[dict[str, Any]]:
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            return conn.execute(query).fetchall()  # type: ignore[arg-type]


async def _migrate(url: str) -> None:
    store = PostgresStore(url, max_size=1, min_size=1)
    try:
        await store.migrate()
    finally:
        await store.close()


def make_runtime(db: Backend, queues: list[Queue], **kwargs: Any) -> Runtime:
    kwargs.setdefault("retry_base", 0.02)
    kwargs.setdefault("rescue_interval", 0.2)
    return Runtime(queues=queues, store=db.url, **kwargs)


def alive(pid: int) -> bool:
    """Whether a process of this pid exists (a child counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
