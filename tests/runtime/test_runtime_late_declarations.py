"""Job kinds declared on a queue after its Runtime exists are known to it: enqueued, run, routed, scheduled.

The usual layout (queues and the runtime in ``app/runtime.py``, jobs in ``app/email_jobs.py``) runs for
real in a fresh interpreter on both SQL stores, and the gate passes the same files; the memory store
runs the same declarations in process. A kind declared on a queue the runtime does not have is an
error at enqueue naming that queue.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corral.runtime import ConfigError, JobContext, Queue, Runtime, UnknownJobKind
from runtime_helpers import Backend

CORRAL = str(Path(sys.executable).parent / "corral")

RUNTIME_MODULE = '''"""Queues and the runtime of the app."""

import os

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
