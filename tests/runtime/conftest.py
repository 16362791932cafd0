"""Fixtures for the runtime tests: how to invoke the CLI and spawn worker processes.

``CLI`` is the one place that says how ``corral worker``/``corral jobs`` are invoked: the real
``corral`` command installed beside this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

APPS = Path(__file__).parent / "apps"

CLI = [str(Path(sys.executable).parent / "corral")]


class Cli:
    """Runs the runtime's CLI against the test apps in ``apps/`` with ``CORRAL_TEST_DB`` set."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(APPS), env.get("PYTHONPATH", "")])
        env["CORRAL_TEST_DB"] = str(self.db)
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

    def python(self, code: str, *, timeout: float = 30, **extra: str) -> None:
        """Run a snippet with the test apps importable (e.g. to enqueue from another process)."""
        subprocess.run([sys.executable, "-c", code], env=self.env(**extra), check=True, timeout=timeout)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def cli(db: Path) -> Cli:
    return Cli(db)
