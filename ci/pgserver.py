"""A throwaway PostgreSQL server for the tests and the benchmarks: initdb + pg_ctl on a Unix socket.

Owns finding the server binaries (Debian's ``postgresql`` package: ``/usr/lib/postgresql/*/bin``,
else ``PATH``), creating a cluster in a temporary directory, starting, restarting and stopping it,
and creating one fresh database per caller. ``initdb`` refuses to run as root, so as root every
server command runs as the ``postgres`` system user (created with ``useradd`` when missing) through
``runuser``. Missing binaries are an error, never a skip: CI installs them (``.ci/run``).

Used by ``tests/runtime/conftest.py`` and ``ci/bench_postgres`` (both put ``ci/`` on ``sys.path``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PgServer", "PgServerError", "find_bindir"]

SERVER_USER = "postgres"


class PgServerError(RuntimeError):
    """The throwaway server cannot be set up (no binaries, initdb or pg_ctl failed)."""


def find_bindir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres`` (newest Debian version first)."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[-3].split(".")[0])
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise PgServerError(
        "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): "
        "install Debian's `postgresql` package (`.ci/run` does this on CI)"
    )


def _ensure_server_user() -> None:
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER], check=True)


class PgServer:
    """One throwaway cluster. ``start()``, ``create_database()``, ``url(db)``, ``restart()``, ``pause()`` /
    ``resume()`` (an outage), ``stop()``. ``settings`` adds server settings (``-c name=value``).

    Durability is off (``fsync=off``, ``synchronous_commit=off``): the cluster lives for one test
    session or one benchmark run and is deleted afterwards.
    """

    def __init__(
        self, *, max_connections: int = 300, superuser: str = "corral", settings: Mapping[str, str] | None = None
    ) -> None:
        self.bindir = find_bindir()
        self.max_connections = max_connections
        self.superuser = superuser
        # More server settings (name -> value), e.g. shared_preload_libraries for pg_stat_statements.
        self.settings = dict(settings or {})
        self.root = Path(tempfile.mkdtemp(prefix="corral-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.port = 5432
        self._as_root = os.geteuid() == 0
        self._counter = 0

    # -- commands -------------------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 120) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise PgServerError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def start(self) -> PgServer:
        if self._as_root:
            _ensure_server_user()
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self.root.chmod(0o755)
        self._run("initdb", "-D", str(self.data), "-U", self.superuser, "--auth=trust", "-E", "UTF8", "--no-sync", "-N")
        self._start()
        return self

    def _start(self) -> None:
        options = " ".join(
            [
                "-c listen_addresses=''",
                f"-c unix_socket_directories={self.socket_dir}",
                f"-c port={self.port}",
                f"-c max_connections={self.max_connections}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                *(f"-c {name}={value}" for name, value in self.settings.items()),
            ]
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every client connection is cut, the server comes back."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._start()

    def pause(self) -> None:
        """``pg_ctl stop -m fast``, keeping the cluster: an outage until :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the cluster :meth:`pause` stopped."""
        self._start()

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- databases ------------------------------------------------------------------------------

    def url(self, database: str = "postgres", *, search_path: str | None = None) -> str:
        url = f"postgresql://{self.superuser}@/{database}?host={self.socket_dir}&port={self.port}"
        if search_path:
            url += f"&options=-csearch_path%3D{search_path}"
        return url

    def create_database(self, name: str = "db", *, unique: bool = True) -> str:
        """Create a fresh, empty database (``name`` made unique unless told not to); return its URL."""
        import psycopg
        from psycopg import sql

        if unique:
            self._counter += 1
            name = f"{name}_{os.getpid()}_{self._counter}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return self.url(name)

    def create_schema(self, database: str, prefix: str = "s") -> str:
        """Create a fresh, empty schema in ``database`` and return a URL whose ``search_path`` is it:
        much cheaper than a database, and unqualified table names resolve there."""
        import psycopg
        from psycopg import sql

        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}"
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return self.url(database, search_path=name)

    def drop_database(self, url: str) -> None:
        import psycopg
        from psycopg import sql

        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))
