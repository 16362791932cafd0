"""Plain helpers shared by the runtime tests (imported by name: tests/runtime is on sys.path)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from corral.runtime import Queue, Runtime


def make_runtime(db: Path, queues: list[Queue], **kwargs: Any) -> Runtime:
    kwargs.setdefault("retry_base", 0.02)
    kwargs.setdefault("rescue_interval", 0.2)
    return Runtime(queues=queues, store=f"sqlite:///{db}", **kwargs)


def job_row(db: Path, job_id: int) -> sqlite3.Row:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM corral_jobs WHERE id = ?", (job_id,)).fetchone()
        assert row is not None
        return row  # type: ignore[no-any-return]
    finally:
        conn.close()


def state_counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT state, COUNT(*) FROM corral_jobs GROUP BY state").fetchall())
    finally:
        conn.close()
