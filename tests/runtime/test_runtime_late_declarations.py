"""Job kinds declared on a queue after its Runtime exists are known to it: enqueued, run, routed, scheduled.

The usual layout (queues and the runtime in ``app/runtime.py``, jobs in ``app/email_jobs.py``) runs for
real in a fresh interpreter on both SQL stores, and the gate passes the same files; the memory store
runs the same declarations in process. A kind declared on a queue the runtime does not have is an
error at enqueue naming that queue.

A worker started on the runtime's module alone (``corral worker app.runtime:runtime``) imports no job
module: its jobs go back to waiting with their attempts, with one WARNING per kind, until a worker that
imports them (``Runtime(include=[...])`` or ``--include``) runs them; a job module that cannot be
imported stops the worker at start, naming it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corral.runtime import ConfigError, JobContext, Queue, Runtime, UnknownJobKind
from runtime_helpers import Backend

CORRAL = str(Path(sys.executable).parent / "corral")

RUNTIME_MODULE = '''"""Queues and the runtime of the app."""

import os
import re

from corral.runtime import Queue, Runtime

mail = Queue("mail", max_workers=2, timeout=30)
maintenance = Queue("maintenance", max_workers=1, timeout=30)
runtime = Runtime(queues=[mail, maintenance], store=os.environ["APP_STORE"], relay_interval=0.05)
'''

JOBS_MODULE = '''"""The app's jobs, declared on the queues of app.runtime after the runtime exists."""

from corral.runtime import JobContext

from app.runtime import mail, maintenance


@mail.job("mail.receipt", max_attempts=3)
async def send_receipt(ctx: JobContext, order_id: int) -> str:
    return f"receipt for order {order_id}"


@mail.job("mail.welcome", on="user.created")
async def welcome(ctx: JobContext, user_id: int) -> str:
    return f"welcome {user_id}"


@maintenance.periodic("sessions.prune", every=3600, run_on_start=True)
async def prune_sessions(ctx: JobContext) -> str:
    return "pruned"
'''

MAIN = """
import asyncio, json
from app.runtime import runtime
import app.email_jobs  # the jobs come after the runtime, as in any app that imports them where used


async def main():
    async with runtime:
        receipt = await runtime.wait(await runtime.enqueue("mail.receipt", order_id=7), timeout=10)
        await runtime.publish("user.created", {"user_id": 3})
        for _ in range(200):
            counts = await runtime.counts()
            if counts["mail"].done == 2 and counts["maintenance"].done == 1:
                break
            await asyncio.sleep(0.05)
        print(json.dumps({"receipt": [receipt.state, receipt.result], "kinds": sorted(runtime.kinds),
                          "done": {name: c.done for name, c in counts.items()}}))

asyncio.run(main())
"""


def _write_app(root: Path) -> None:
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text('"""The app."""\n')
    (root / "app" / "runtime.py").write_text(RUNTIME_MODULE)
    (root / "app" / "email_jobs.py").write_text(JOBS_MODULE)


def test_the_usual_layout_across_modules_runs_and_passes_the_gate(db: Backend, tmp_path: Path) -> None:
    _write_app(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "APP_STORE": db.url}
    done = subprocess.run(
        [sys.executable, "-c", MAIN], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["receipt"] == ["done", "receipt for order 7"]
    assert outcome["kinds"] == ["mail.receipt", "mail.welcome", "sessions.prune"]
    assert outcome["done"] == {"mail": 2, "maintenance": 1}  # enqueued, relayed from the event, periodic
    rows = db.rows("SELECT kind, state, attempt FROM corral_jobs ORDER BY id")
    assert sorted((row["kind"], row["state"], row["attempt"]) for row in rows) == [
        ("mail.receipt", "done", 1),
        ("mail.welcome", "done", 1),
        ("sessions.prune", "done", 1),
    ]
    gate = subprocess.run(
        [CORRAL, "check", ".", "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr  # the gate agrees: nothing wrong with this layout


def test_kinds_declared_after_the_runtime_run_on_the_memory_store() -> None:
    mail = Queue("mail", max_workers=2, timeout=5)
    runtime = Runtime(queues=[mail], store="memory://", relay_interval=0.01)

    @mail.job("mail.receipt")
    async def send_receipt(ctx: JobContext, order_id: int) -> int:
        return order_id

    async def main() -> None:
        async with runtime:
            status = await runtime.wait(await runtime.enqueue("mail.receipt", order_id=7), timeout=5)
            assert (status.state, status.result) == ("done", 7)

            @mail.job("mail.after.start", on="order.paid")  # even after start()
            async def after_start(ctx: JobContext, order_id: int) -> int:
                return order_id * 2

            await runtime.publish("order.paid", {"order_id": 4})
            for _ in range(200):
                if (await runtime.counts())["mail"].done == 2:
                    break
                await asyncio.sleep(0.01)
            assert (await runtime.counts())["mail"].done == 2

    asyncio.run(main())


def test_a_kind_on_a_queue_the_runtime_does_not_have_names_that_queue(db: Backend) -> None:
    mail = Queue("mail", max_workers=1, timeout=5)
    lonely = Queue("lonely", max_workers=1, timeout=5)
    other_mail = Queue("mail", max_workers=1, timeout=5)  # same name, another object
    runtime = Runtime(queues=[mail], store=db.url)

    @lonely.job("lonely.job")
    async def lonely_job(ctx: JobContext) -> None:
        return None

    @other_mail.job("mail.elsewhere")
    async def elsewhere(ctx: JobContext) -> None:
        return None

    async def main() -> None:
        async with runtime:
            with pytest.raises(UnknownJobKind, match=r"job kind 'lonely\.job' is declared on queue 'lonely', which is"):
                await runtime.enqueue("lonely.job")
            with pytest.raises(UnknownJobKind, match=r"'mail\.elsewhere' is declared on queue 'mail', which"):
                await runtime.enqueue("mail.elsewhere")
            with pytest.raises(UnknownJobKind, match=r"unknown job kind 'never\.declared'; declared kinds: none"):
                await runtime.enqueue("never.declared")
            assert (await runtime.counts())["mail"].waiting == 0

    asyncio.run(main())


def test_a_late_kind_declared_on_two_of_the_runtimes_queues_is_a_config_error() -> None:
    first, second = Queue("first", max_workers=1, timeout=5), Queue("second", max_workers=1, timeout=5)
    runtime = Runtime(queues=[first, second], store="memory://")

    async def noop(ctx: JobContext) -> None:
        return None

    first.job("twice")(noop)
    second.job("twice")(noop)

    async def main() -> None:
        async with runtime:
            with pytest.raises(ConfigError, match="job kind 'twice' is declared on queue 'first' and on 'second'"):
                await runtime.enqueue("twice")

    asyncio.run(main())


# The same layout as a worker sees it: `corral worker app.runtime:runtime` imports app/runtime.py alone.
WORKER_RUNTIME_MODULE = '''"""Queues and the runtime of the app; the jobs live in app.jobs and app.email_jobs."""

import os
import re

from corral.runtime import Queue, Runtime

mail = Queue("mail", max_workers=2, timeout=30)
reports = Queue("reports", max_workers=1, timeout=30)
runtime = Runtime(queues=[mail, reports], store=os.environ["APP_STORE"], unknown_kind_snooze=0.3, retry_base=0.05)
included = Runtime(
    queues=[mail, reports],
    store=os.environ["APP_STORE"],
    include=["app.jobs", "app.email_jobs"],
    unknown_kind_snooze=0.3,
)
broken = Runtime(queues=[mail, reports], store=os.environ["APP_STORE"], include=["app.jobs", "app.broken_jobs"])
'''

EMAIL_JOBS_MODULE = '''"""Mail jobs, declared on the queues of app.runtime."""

from corral.runtime import JobContext

from app.runtime import mail


@mail.job("mail.receipt", max_attempts=2)
async def send_receipt(ctx: JobContext, order_id: int) -> str:
    return f"receipt for order {order_id}"
'''

REPORT_JOBS_MODULE = '''"""Report jobs: a `def` job, so its attempts run in the runtime's child processes."""

from corral.runtime import JobContext

from app.runtime import reports


@reports.job("reports.build", max_attempts=2)
def build_report(ctx: JobContext, month: int) -> str:
    return f"report {month}"
'''

ENQUEUE = """
import asyncio, json, sys
from app.runtime import runtime
import app.email_jobs, app.jobs  # the web process imports the jobs where it enqueues them


async def main():
    await runtime.start(queues=[])
    ids = [await runtime.enqueue("mail.receipt", order_id=7), await runtime.enqueue("reports.build", month=3)]
    await runtime.stop()
    print(json.dumps(ids))

asyncio.run(main())
"""


def _write_worker_app(root: Path) -> None:
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text('"""The app."""\n')
    (root / "app" / "runtime.py").write_text(WORKER_RUNTIME_MODULE)
    (root / "app" / "email_jobs.py").write_text(EMAIL_JOBS_MODULE)
    (root / "app" / "jobs.py").write_text(REPORT_JOBS_MODULE)
    (root / "app" / "broken_jobs.py").write_text('"""Fails at import."""\n\nraise RuntimeError("no SMTP settings")\n')


def _app_env(db: Backend, root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root), "APP_STORE": db.url}


def _enqueue_both(db: Backend, root: Path) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-c", ENQUEUE],
        env=_app_env(db, root),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ids: list[int] = json.loads(done.stdout)
    return ids


def _start_worker(db: Backend, root: Path, target: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
    log = root / f"worker-{len(list(root.glob('worker-*.log')))}.log"
    with log.open("w") as sink:
        worker = subprocess.Popen(
            [CORRAL, "worker", target, *args],
            env=_app_env(db, root),
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
        )
    return worker, log


def _stop_worker(worker: subprocess.Popen[str]) -> None:
    worker.terminate()
    assert worker.wait(timeout=30) == 0


def _jobs(db: Backend) -> dict[str, tuple[str, int]]:
    return {
        row["kind"]: (row["state"], row["attempt"]) for row in db.rows("SELECT kind, state, attempt FROM corral_jobs")
    }


def _wait_for_done(db: Backend, count: int) -> None:
    for _ in range(300):
        if db.state_counts().get("done", 0) == count:
            return
        time.sleep(0.05)
    raise AssertionError(f"not all done: {_jobs(db)}")


@pytest.fixture
def worker_app(db: Backend, tmp_path: Path) -> Path:
    _write_worker_app(tmp_path)
    migrated = subprocess.run(
        [CORRAL, "migrate", "app.runtime:runtime"],
        env=_app_env(db, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    return tmp_path


def test_a_worker_that_does_not_know_a_kind_leaves_its_jobs_waiting_with_their_attempts(
    db: Backend, worker_app: Path
) -> None:
    _enqueue_both(db, worker_app)
    worker, log = _start_worker(db, worker_app, "app.runtime:runtime")
    try:
        for _ in range(300):  # claimed, put back, claimed again after the 0.3 s snooze...
            if log.read_text().count("is not declared in this process") >= 2:
                break
            time.sleep(0.05)
        seen = set()
        for _ in range(20):  # several snooze windows: with max_attempts=2, failing them would have failed both
            seen |= {state for state, _ in _jobs(db).values()}
            time.sleep(0.05)
    finally:
        _stop_worker(worker)
    assert seen <= {"waiting", "running"}  # running: between a claim and its put-back
    assert _jobs(db) == {"mail.receipt": ("waiting", 0), "reports.build": ("waiting", 0)}
    claims = db.scalar("SELECT MAX(claims) AS n FROM corral_jobs")
    assert 2 <= claims <= 8  # looked at again once per snooze window, not hot-looped
    text = log.read_text()
    for kind, queue in (("mail.receipt", "mail"), ("reports.build", "reports")):
        # one WARNING per kind (the next only after a minute), naming the kind and how to import its module
        assert text.count(f"job kind {kind!r} is not declared in this process (queue {queue!r})") == 1, text
    assert "corral worker --include MODULE (included now: none)" in text
    assert "failed" not in text

    # the same jobs, once the worker imports their modules: run, with their first attempt
    worker, log = _start_worker(
        db, worker_app, "app.runtime:runtime", "--include", "app.email_jobs", "--include", "app.jobs"
    )
    try:
        _wait_for_done(db, 2)
    finally:
        _stop_worker(worker)
    assert _jobs(db) == {"mail.receipt": ("done", 1), "reports.build": ("done", 1)}
    assert "not declared" not in log.read_text()


def test_a_runtime_that_includes_the_job_modules_runs_their_jobs_in_a_worker(db: Backend, worker_app: Path) -> None:
    ids = _enqueue_both(db, worker_app)
    worker, log = _start_worker(db, worker_app, "app.runtime:included")
    try:
        _wait_for_done(db, 2)
    finally:
        _stop_worker(worker)
    assert _jobs(db) == {"mail.receipt": ("done", 1), "reports.build": ("done", 1)}
    results = {
        row["id"]: row["result"] for row in db.rows("SELECT id, CAST(result AS TEXT) AS result FROM corral_jobs")
    }
    assert [json.loads(str(results[job_id])) for job_id in ids] == ["receipt for order 7", "report 3"]
    assert "not declared" not in log.read_text()
    gate = subprocess.run(
        [CORRAL, "check", ".", "--no-cache"], cwd=worker_app, capture_output=True, text=True, timeout=60, check=False
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr  # include= is nothing the gate objects to


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        (
            "app.runtime:runtime",
            ["--include", "app.missing_jobs"],
            "corral worker: --include module 'app.missing_jobs' cannot be imported: "
            "ModuleNotFoundError: No module named 'app.missing_jobs'",
        ),
        (
            "app.runtime:runtime",
            ["--include", "app/jobs.py"],
            "corral worker: invalid module name 'app/jobs.py' in --include: must be a dotted module name",
        ),
        (
            "app.runtime:broken",
            [],
            "corral worker: include module 'app.broken_jobs' cannot be imported: RuntimeError: no SMTP settings "
            "(at ",  # its file and line: app/broken_jobs.py:3
        ),
    ],
    ids=["missing", "a-path", "raises-at-import"],
)
def test_a_job_module_that_cannot_be_imported_stops_the_worker_naming_it(
    db: Backend, worker_app: Path, target: str, args: list[str], message: str
) -> None:
    _enqueue_both(db, worker_app)
    worker, log = _start_worker(db, worker_app, target, *args)
    assert worker.wait(timeout=30) == 2
    text = log.read_text()
    assert message in text and "Traceback" not in text, text
    if "broken_jobs" in message:
        assert f"{worker_app / 'app' / 'broken_jobs.py'}:3)" in text, text
    assert _jobs(db) == {"mail.receipt": ("waiting", 0), "reports.build": ("waiting", 0)}  # nothing claimed


@pytest.mark.parametrize(
    ("include", "message"),
    [
        ("app.jobs", "include must be a list of dotted module names"),
        (["app..jobs"], "invalid module name 'app..jobs' in include"),
        (["app.jobs:runtime"], "invalid module name 'app.jobs:runtime' in include"),
        ([".jobs"], "invalid module name '.jobs' in include"),
        ([7], "invalid module name 7 in include"),
    ],
)
def test_include_takes_dotted_module_names_only(include: object, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Runtime(queues=[Queue("mail", max_workers=1, timeout=5)], store="memory://", include=include)  # type: ignore[arg-type]


def test_include_is_imported_at_start_not_at_construction_and_a_failure_names_the_module(tmp_path: Path) -> None:
    (tmp_path / "late_jobs_pkg").mkdir()
    (tmp_path / "late_jobs_pkg" / "__init__.py").write_text('"""A package of jobs."""\n')
    (tmp_path / "late_jobs_pkg" / "receipts.py").write_text(
        "from corral.runtime import JobContext\nfrom late_jobs_pkg import QUEUE\n\n\n"
        "@QUEUE.job('late.receipt')\nasync def receipt(ctx: JobContext, order_id: int) -> int:\n    return order_id\n"
    )
    code = f"""
import asyncio, sys
sys.path.insert(0, {str(tmp_path)!r})
import late_jobs_pkg
from corral.runtime import ConfigError, Queue, Runtime
late_jobs_pkg.QUEUE = mail = Queue("mail", max_workers=1, timeout=5)
runtime = Runtime(queues=[mail], store="memory://", include=["late_jobs_pkg.nope"])
try:
    asyncio.run(runtime.start())
except ConfigError as exc:
    print(exc)
runtime = Runtime(queues=[mail], store="memory://", include=["late_jobs_pkg.receipts"])
assert "late.receipt" not in runtime.kinds  # not imported at construction: the runtime's module may be imported first

async def main():
    async with runtime:
        status = await runtime.wait(await runtime.enqueue("late.receipt", order_id=4), timeout=5)
        print(status.state, status.result)

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "include module 'late_jobs_pkg.nope' cannot be imported: "
        "ModuleNotFoundError: No module named 'late_jobs_pkg.nope'",
        "done 4",
    ]
