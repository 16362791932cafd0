"""What the spawned-pool tests hand to spawned workers. A spawned worker imports the module of each
function it runs by name: this one imports nothing of the tests' own, so that it loads whichever test
folder's `conftest` an earlier test put first on the path."""

from __future__ import annotations

import multiprocessing
import os
import signal

SETTING: list[int] = []


def configure(value: int) -> None:
    SETTING[:] = [value]


def dies_in_a_spawned_worker(path: str) -> str:
    if path.endswith("_7.py") and multiprocessing.parent_process() is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    return path[::-1]
