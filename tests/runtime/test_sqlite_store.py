"""The SQLite store when several processes open one new database file at the same moment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OPEN_AND_CLOSE = """
import asyncio, sys
from corral.runtime.stores.sqlite import SqliteStore

async def main():
    store = SqliteStore(path=sys.argv[1], busy_timeout=10)
    await store.open()
    await store.close()

asyncio.run(main())
"""


def test_processes_opening_a_new_store_together_all_get_it(tmp_path: Path) -> None:
    # Switching a new file to WAL mode takes its lock without SQLite's busy handler waiting, so the
    # losers of the race used to fail with "database is locked" instead of waiting their turn.
    for attempt in range(3):
        path = tmp_path / f"jobs-{attempt}.db"
        openers = [
            subprocess.Popen([sys.executable, "-c", OPEN_AND_CLOSE, str(path)], stderr=subprocess.PIPE, text=True)
            for _ in range(12)
        ]
        for opener in openers:
            _, errors = opener.communicate(timeout=60)
            assert opener.returncode == 0, errors
