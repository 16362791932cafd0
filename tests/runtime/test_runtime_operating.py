"""Operating a runtime from the command line: ``corral jobs`` (counts, list, show, retry, purge, --watch) on
both stores through the real command, the store it never creates, and ``corral worker``'s checked options,
import errors and second stop signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import CLI, Cli
from runtime_helpers import Backend

# From a process that works no queue itself.
ENQUEUE = """
import asyncio, operateapp
async def main():
    await operateapp.runtime.start(queues=[])
    await operateapp.runtime.enqueue({kind!r}, {args})
    await operateapp.runtime.stop()
asyncio.run(main())
"""


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["version"] == 1
    return document


def test_jobs_lists_shows_retries_and_purges(cli: Cli, tmp_path: Path) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    env = {"CORRAL_TEST_FAIL_FLAG": str(flag)}
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    cli.python("import operateapp; operateapp.settle(ok=2, flaky=2)", **env)
    cli.python(ENQUEUE.format(kind="slow.sleep", args="seconds=1, delay=3600"))

    counts = _json(cli.run("jobs", "operateapp:runtime", "--format", "json"))
    assert counts["queues"] == {
        "ops": {"waiting": 0, "running": 0, "retrying": 0, "failed": 2, "done": 2, "cancelled": 0},
        "slow": {"waiting": 1, "running": 0, "retrying": 0, "failed": 0, "done": 0, "cancelled": 0},
    }
    failed = _json(cli.run("jobs", "operateapp:runtime", "list", "--state", "failed", "--format", "json"))["jobs"]
    assert [(job["kind"], job["args"], job["attempt"]) for job in failed] == [
        ("ops.flaky", {"n": 1}, 2),
        ("ops.flaky", {"n": 0}, 2),
    ]
    assert failed[0]["error"] == "RuntimeError: flaky job 1 failed on attempt 2"
    assert failed[0]["finished_at"].endswith("+00:00") and "T" in failed[0]["enqueued_at"]
    listed = cli.run("jobs", "operateapp:runtime", "list", "--queue", "ops", "--kind", "ops.ok", "--since", "1h")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[1:5] for line in listed.stdout.splitlines()] == [["ops/ops.ok", "attempt", "1/5", "done"]] * 2
    assert cli.run("jobs", "operateapp:runtime", "list", "--since", "2999-01-01T00:00").stdout == "no jobs\n"
    assert len(_json(cli.run("jobs", "operateapp:runtime", "list", "--limit", "2", "--format", "json"))["jobs"]) == 2

    job_id = failed[0]["id"]
    shown = _json(cli.run("jobs", "operateapp:runtime", "show", str(job_id), "--format", "json"))["job"]
    assert [(a["attempt"], a["outcome"]) for a in shown["attempts"]] == [(1, "retrying"), (2, "failed")]
    assert "RuntimeError: flaky job 1 failed on attempt 1" in shown["attempts"][0]["traceback"]
    text = cli.run("jobs", "operateapp:runtime", "show", str(job_id))
    assert text.returncode == 0, text.stderr
    assert "1. retrying on" in text.stdout and "2. failed on" in text.stdout
    assert "| RuntimeError: flaky job 1 failed on attempt 2" in text.stdout
    missing = cli.run("jobs", "operateapp:runtime", "show", "999999")
    assert missing.returncode == 1 and "no job #999999" in missing.stderr

    done = _json(cli.run("jobs", "operateapp:runtime", "list", "--state", "done", "--format", "json"))["jobs"]
    done_id = done[0]["id"]
    partly = cli.run("jobs", "operateapp:runtime", "retry", str(job_id), str(done_id), "--format", "json")
    assert partly.returncode == 1 and json.loads(partly.stdout) == {
        "version": 1,
        "retried": [job_id],
        "skipped": [done_id],
    }
    everything = _json(cli.run("jobs", "operateapp:runtime", "retry", "--failed", "--queue", "ops", "--format", "json"))
    assert everything["retried"] == [failed[1]["id"]]
    flag.unlink()
    worker = cli.start_worker("operateapp:runtime", "--queues", "ops", **env)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            queues = _json(cli.run("jobs", "operateapp:runtime", "--format", "json"))["queues"]
            if queues["ops"]["done"] == 4:
                break
            time.sleep(0.2)
        assert queues["ops"] == {"waiting": 0, "running": 0, "retrying": 0, "failed": 0, "done": 4, "cancelled": 0}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    retried = _json(cli.run("jobs", "operateapp:runtime", "show", str(job_id), "--format", "json"))["job"]
    assert [a["outcome"] for a in retried["attempts"]] == ["retrying", "failed", "done"]

    purged = _json(cli.run("jobs", "operateapp:runtime", "purge", "--done", "--older-than", "1h", "--format", "json"))
    assert (purged["purged"], purged["states"]) == (0, ["done"])
    time.sleep(0.1)
    purged = _json(
        cli.run("jobs", "operateapp:runtime", "purge", "--done", "--failed", "--older-than", "0s", "--format", "json")
    )
    assert purged["purged"] == 4
    counts = _json(cli.run("jobs", "operateapp:runtime", "--format", "json"))["queues"]
    assert counts["ops"]["done"] == 0 and counts["slow"]["waiting"] == 1  # waiting jobs are never purged


def test_jobs_refuses_bad_usage_with_a_message(cli: Cli) -> None:
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    for args, message in [
        (["retry"], "retry takes job ids or --failed"),
        (["retry", "3", "--failed"], "retry takes job ids or --failed"),
        (["retry", "3", "--queue", "ops"], "retry --queue goes with --failed"),
        (["purge", "--older-than", "7d"], "purge needs --done, --failed, --cancelled or several of them"),
        (["purge", "--done", "--older-than", "a week"], "expected a duration such as 45s"),
        (["list", "--since", "yesterday"], "expected a duration ago (1h, 2d) or an ISO-8601 time"),
        (["list", "--limit", "0"], "must be a positive whole number"),
        (["show", str(2**63)], "must be a job id (a whole number from 1 to 2**63 - 1)"),
        (["cancel", "0"], "must be a job id"),
        (["list", "--state", "lost"], "invalid choice: 'lost'"),
        (["--watch", "0"], "must be more than zero"),
    ]:
        result = cli.run("jobs", "operateapp:runtime", *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_jobs_never_creates_a_sqlite_store(tmp_path: Path, db: Backend) -> None:
    missing = tmp_path / "elsewhere" / "jobs.db"
    missing.parent.mkdir()
    cli = Cli(db)
    for action in (
        ["counts"],
        ["list"],
        ["show", "1"],
        ["retry", "--failed"],
        ["purge", "--done", "--older-than", "1d"],
    ):
        result = cli.run("jobs", "operateapp:runtime", *action, CORRAL_TEST_STORE=f"sqlite:///{missing}")
        assert result.returncode == 2, result.stdout
        assert f"no SQLite store at {missing}: it is never created" in result.stderr
    assert list(missing.parent.iterdir()) == []


def test_jobs_needs_a_migrated_sqlite_store(tmp_path: Path, db: Backend) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = Cli(db).run("jobs", "operateapp:runtime", CORRAL_TEST_STORE=f"sqlite:///{empty}")
    assert result.returncode == 2 and f"{empty} is not a corral store" in result.stderr, result.stderr


def test_jobs_watch_refreshes_until_ctrl_c(cli: Cli) -> None:
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    watcher = cli.spawn("jobs", "operateapp:runtime", "--watch", "0.2s", "--format", "json")
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        cli.python(ENQUEUE.format(kind="ops.ok", args="n=1"))
        while True:
            later = json.loads(watcher.stdout.readline())
            if later["queues"]["ops"]["waiting"] == 1:
                break
        assert first["queues"]["ops"]["waiting"] == 0 and later["at"] > first["at"]
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=10) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
        watcher.communicate()


# -- corral worker ---------------------------------------------------------------------------------


def test_worker_checks_its_log_level_and_says_why_the_target_cannot_be_imported(cli: Cli, tmp_path: Path) -> None:
    level = cli.run("worker", "operateapp:runtime", "--log-level", "loud")
    assert level.returncode == 2 and "invalid choice: 'LOUD'" in level.stderr
    missing = cli.run("worker", "no_such_app:runtime")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "cannot import no_such_app:runtime: no module named 'no_such_app'" in missing.stderr
    (tmp_path / "broken_app.py").write_text("import os\n\nraise RuntimeError('no DATABASE_URL set')\n")
    (tmp_path / "needs_dep.py").write_text("import not_installed_anywhere\n")
    # raised inside the standard library (<frozen os>): where is still the user's line
    (tmp_path / "env_app.py").write_text("import os\n\nDATABASE = os.environ['NOT_SET_ANYWHERE']\n")
    for target, message in [
        ("broken_app:runtime", f"RuntimeError: no DATABASE_URL set (at {tmp_path / 'broken_app.py'}:3)"),
        ("env_app:runtime", f"KeyError: 'NOT_SET_ANYWHERE' (at {tmp_path / 'env_app.py'}:3)"),
        ("needs_dep:runtime", "ModuleNotFoundError: No module named 'not_installed_anywhere'"),
    ]:
        result = subprocess.run(
            [*CLI, "worker", target], cwd=tmp_path, env=cli.env(), capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"corral worker: cannot import {target}: {message}" in result.stderr


def test_ctrl_c_while_the_target_is_imported_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    marker = tmp_path / "importing"
    (tmp_path / "slow_app.py").write_text(
        f"import pathlib, time\n\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(30)\n"
    )
    for command in ("worker", "ui"):
        marker.unlink(missing_ok=True)
        started = subprocess.Popen([*CLI, command, "slow_app:runtime"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 20
            while not marker.exists():
                assert time.monotonic() < deadline and started.poll() is None, "the target was never imported"
                time.sleep(0.02)
            started.send_signal(signal.SIGINT)
            _, err = started.communicate(timeout=10)
        finally:
            if started.poll() is None:
                started.kill()
                started.communicate()
        assert (started.returncode, err) == (130, ""), (command, err)


def test_a_second_stop_signal_ends_the_grace_at_once(cli: Cli, db: Backend) -> None:
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    cli.python(ENQUEUE.format(kind="slow.sleep", args="seconds=600"))
    worker = cli.spawn("worker", "operateapp:runtime", "--log-level", "WARNING", CORRAL_TEST_GRACE="300")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and db.state_counts().get("running", 0) < 1:
            time.sleep(0.05)
        assert db.state_counts() == {"running": 1}
        worker.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert worker.poll() is None  # the soft stop waits for the job, up to its 300 s of grace
        stopped_at = time.monotonic()
        worker.send_signal(signal.SIGINT)
        assert worker.wait(timeout=20) == 0
        assert time.monotonic() - stopped_at < 10
    finally:
        if worker.poll() is None:
            worker.kill()
        _, stderr = worker.communicate()
    assert "signal again to stop at once" in stderr and "second stop signal" in stderr
    assert db.state_counts() == {"waiting": 1}
    assert db.scalar("SELECT MAX(attempt) FROM corral_jobs") == 0  # released, no attempt spent


def test_python_dash_m_runs_the_same_jobs_command(cli: Cli) -> None:
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    result = subprocess.run(
        [sys.executable, "-m", "corral.runtime.cli", "jobs", "operateapp:runtime", "list"],
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "no jobs\n", result.stderr
