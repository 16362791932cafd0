"""Fixtures for the runtime tests: the store each test runs against, the CLI, and a real PostgreSQL.

``db`` is parametrised over both stores, like a driver test suite: every test that takes it runs on
a fresh SQLite file and on a fresh schema (its URL's ``search_path``) of a throwaway PostgreSQL
server (``ci/pgserver.py``: initdb + pg_ctl on a Unix socket, started once per session on first use,
stopped at the end). The server binaries are required, never skipped: CI installs them.

``CLI`` is the one place that says how ``corral worker``/``corral jobs``/``corral migrate`` are
invoked: the real ``corral`` command installed beside this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))

from pgserver import PgServer, PgServerError  # noqa: E402
from runtime_helpers import Backend, PostgresBackend, SqliteBackend  # noqa: E402

APPS = Path(__file__).parent / "apps"

CLI = [str(Path(sys.executable).parent / "corral")]


class Cli:
    """Runs the runtime's CLI against the test apps in ``apps/`` with ``CORRAL_TEST_STORE`` set."""

    def __init__(self, db: Backend) -> None:
        self.db = db

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(APPS), env.get("PYTHONPATH", "")])
        env["CORRAL_TEST_STORE"] = self.db.url
        env.update(extra)
        return env

    def run(self, *args: str, timeout: float = 30, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], env=self.env(**extra), capture_output=True, text=True, timeout=timeout, check=False
        )

    def start_worker(self, target: str, *args: str, **extra: str) -> subprocess.Popen[Any]:
        return subprocess.Popen(
            [*CLI, "worker", target, "--log-level", "ERROR", *args],
            env=self.env(**extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        """Start ``corral ARGS...`` with its output piped (text), for a test that reads it while it runs."""
        return subprocess.Popen(
            [*CLI, *args], env=self.env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def python(self, code: str, *, timeout: float = 30, **extra: str) -> None:
        """Run a snippet with the test apps importable (e.g. to enqueue from another process)."""
        subprocess.run([sys.executable, "-c", code], env=self.env(**extra), check=True, timeout=timeout)


TEST_DATABASE = "corral_test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # `ci/test -m "not postgresql"` on the other Pythons: the store's SQL and the server do not change with them.
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()) or "[postgres" in item.nodeid:
            item.add_marker(pytest.mark.postgresql)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        server = PgServer().start()
        server.create_database(TEST_DATABASE, unique=False)
    except PgServerError as exc:
        pytest.fail(f"cannot start the test PostgreSQL server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg(pg_server: PgServer) -> PostgresBackend:
    """A fresh, migrated schema (for the tests of what only a server gives); the server is thrown away
    at the end of the session, and every schema with it."""
    return PostgresBackend(pg_server.create_schema(TEST_DATABASE, "t"), server=pg_server)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield SqliteBackend(tmp_path / "jobs.db")
    else:
        yield request.getfixturevalue("pg")


@pytest.fixture
def cli(db: Backend) -> Cli:
    return Cli(db)
