"""The gate's worker processes: every job answered once and in order, whatever a worker does."""

from __future__ import annotations

import os
import signal
import time

import pytest
from corral.gates.infra import parallel

PARENT = os.getpid()
SETTING: list[int] = []


def _configure(value: int) -> None:
    SETTING[:] = [value]


def _square_plus_setting(job: int) -> tuple[int, int]:
    time.sleep(0.0005)  # long enough that the first worker cannot drain the queue alone
    return job * job + SETTING[0], os.getpid()


def _dies_in_a_worker(job: int) -> int:
    if job == 7 and os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return -job


def _fails_in_a_worker(job: int) -> int:
    if job % 50 == 3 and os.getpid() != PARENT:
        raise RuntimeError("a worker's bug")
    return job + 1


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_results_come_back_in_order_from_several_workers() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: no workers are started")
    results = parallel.map_in_processes(_square_plus_setting, range(500), initializer=_configure, initargs=(3,))
    assert [value for value, _ in results] == [job * job + 3 for job in range(500)]
    workers = {pid for _, pid in results}
    assert PARENT not in workers and len(workers) >= 2


def test_a_killed_worker_loses_no_job() -> None:
    descriptors = _open_descriptors()
    results = parallel.map_in_processes(_dies_in_a_worker, list(range(300)), initializer=_configure, initargs=(0,))
    assert results == [-job for job in range(300)]
    assert _open_descriptors() == descriptors


def test_a_failing_worker_loses_no_job() -> None:
    results = parallel.map_in_processes(_fails_in_a_worker, list(range(300)), initializer=_configure, initargs=(0,))
    assert results == [job + 1 for job in range(300)]


def test_spawned_pool_for_platforms_without_fork() -> None:
    # Spawned workers import what they run: builtins keep the test independent of this module's path.
    results = parallel._map_in_spawned_pool(abs, [-n for n in range(40)], 2, int, ())
    assert results == list(range(40))
