"""CRL3: SQLAlchemy engines declared at a module's top level, through the real `corral check`: each engine's
pool (`pool_size + max_overflow`, SQLAlchemy's defaults 5 and 10) in every process, against `max_conns` x
`reserve`; a pool the gate cannot bound is CRL302."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import run_budget, run_corral

# 40 x 0.5 = 20 connections for the engines.
CONFIG = "[tool.corral]\nmax-conns = 40\n"
ENGINES = """
    import os
    from sqlalchemy import create_engine as make_engine
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    engine = make_engine(os.environ["DATABASE_URL"], pool_size=10, max_overflow=5)
    Reports = async_sessionmaker(create_async_engine("postgresql+asyncpg://db/reports"))
"""


def check(project: Any, files: dict[str, str]) -> tuple[int, list[str], list[dict[str, Any]]]:
    root = project({"pyproject.toml": CONFIG, "app/__init__.py": "", **files})
    return run_budget(root)


def test_the_engines_pools_times_the_web_processes_over_the_share_is_crl301(project) -> None:
    _, found, (entry,) = check(project, {"app/db.py": ENGINES, "gunicorn.conf.py": "workers = 2\n"})
    (finding,) = found
    assert finding.startswith("app/db.py:5:10 CRL301 SQLAlchemy engines could hold more database connections")
    assert "(engine app/db.py:5 15 + engine app/db.py:6 15) x processes 2 = 60 > 20 (max_conns 40 x reserve 0.5)" in (
        finding
    )
    assert entry["sources"] == [
        "engine app/db.py:5 (QueuePool): pool_size 10 at app/db.py:5 + max_overflow 5 at app/db.py:5",
        "engine app/db.py:6 (AsyncAdaptedQueuePool): pool_size 5 (SQLAlchemy's default) + "
        "max_overflow 10 (SQLAlchemy's default)",
        "processes 2 from gunicorn.conf.py:1 (gunicorn workers): each process keeps its own pools",
    ]
    completed = run_corral("check", "--budget", cwd=project({}))
    assert "budget of the SQLAlchemy engines (the first at app/db.py:5): OVER" in completed.stdout


def test_pools_that_fit_or_keep_no_connection_stay_clean(project) -> None:
    engines = """
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool, SingletonThreadPool, StaticPool

        engine = create_engine("postgresql://db/app", pool_size=8, max_overflow=2)
        raw = create_engine("postgresql://db/app", poolclass=NullPool)
        local = create_engine("sqlite:///cache.db", pool_size=50)
        single = create_engine("postgresql://db/app", poolclass=StaticPool)
        threads = create_engine("postgresql://db/app", poolclass=SingletonThreadPool, pool_size=3, max_overflow=99)

        def per_call():
            return create_engine("postgresql://db/app", pool_size=500)

        later = lambda: create_engine("postgresql://db/app", pool_size=500)
    """
    test_engine = "from sqlalchemy import create_engine\nengine = create_engine('postgresql://db/test', pool_size=50)\n"
    code, found, (entry,) = check(project, {"app/db.py": engines, "tests/conftest.py": test_engine})
    assert (code, found) == (0, [])
    assert entry["ok"] is True
    assert entry["arithmetic"] == (
        "engine app/db.py:4 10 + engine app/db.py:7 1 + engine app/db.py:8 3 = 14 <= 20 (max_conns 40 x reserve 0.5)"
    )
    assert "engine app/db.py:5: NullPool keeps no connection, not counted" in entry["sources"]
    assert "engine app/db.py:6: SQLite: a file, no server connections, not counted" in entry["sources"]


def test_without_max_conns_nothing_is_checked(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/__init__.py": "", "app/db.py": ENGINES})
    completed = run_corral("check", "--format", "json", cwd=root)
    assert completed.returncode == 0, completed.stdout
    assert json.loads(completed.stdout)["budget"] == []


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            'pool_size=int(os.environ["POOL"])',
            "pool_size: os.environ['POOL'] reads the environment with no static default",
        ),
        ("pool_size=0", "pool_size=0 puts no limit on the pool"),
        ("max_overflow=-1", "max_overflow=-1 puts no limit on the pool"),
        ("max_overflow=2.5", "max_overflow must be a whole number >= 0, got 2.5"),
        ("poolclass=MyPool", "poolclass=MyPool is not a pool of SQLAlchemy's the gate knows"),
        ("**OPTIONS", "create_engine(**...) hides its pool arguments from the gate"),
        ("pool=QueuePool(connect)", "pool=: a pool built outside the engine's arguments"),
    ],
)
def test_a_pool_the_gate_cannot_bound_is_crl302(project, arguments: str, reason: str) -> None:
    source = f"""
        import os
        from sqlalchemy import create_engine
        from sqlalchemy.pool import QueuePool
        from app.pools import MyPool, OPTIONS, connect

        engine = create_engine("postgresql://db/app", {arguments})
    """
    _, found, (entry,) = check(project, {"app/db.py": source, "app/pools.py": "MyPool = OPTIONS = connect = None\n"})
    (finding,) = found
    assert finding.startswith(f"app/db.py:6:1 CRL302 {reason}"), finding
    assert "the connections of the SQLAlchemy engines against [tool.corral] max-conns cannot be counted" in finding
    assert entry["ok"] is None


def test_worker_processes_holding_the_engines_are_counted_only_through_processes(project) -> None:
    compose = "services:\n  worker:\n    image: app\n    command: celery -A app worker -c 4\n"
    _, found, _ = check(project, {"app/db.py": ENGINES, "compose.yml": compose})
    (finding,) = found
    assert finding.startswith("compose.yml:4:1 CRL302 the deployment runs celery worker (service worker, no deploy")
    assert "), and the gate cannot tell which processes import the engines' modules" in finding
    assert "set processes in [tool.corral]" in finding
    configured = {"pyproject.toml": CONFIG + "processes = 1\nreserve = 0.8\n"}
    code, found, (entry,) = check(project, {"app/db.py": ENGINES, "compose.yml": compose, **configured})
    assert (code, found) == (0, [])
    assert (
        entry["arithmetic"] == "engine app/db.py:5 15 + engine app/db.py:6 15 = 30 <= 32 (max_conns 40 x reserve 0.8)"
    )
