"""The gate's worker processes: every path answered once, whatever a worker does, while paths still come."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from corral.gates.engine.infra import parallel

PARENT = os.getpid()
SETTING: list[int] = []
PATHS = [f"/project/app/module_{number}.py" for number in range(400)]


def _configure(value: int) -> None:
    SETTING[:] = [value]


def _answer(path: str) -> tuple[str, int, float]:
    time.sleep(0.0005)  # long enough that the first worker cannot drain the queue alone
    return path.upper() + str(SETTING[0]), os.getpid(), time.monotonic()


def _dies_in_a_worker(path: str) -> str:
    if path.endswith("_7.py") and os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return path[::-1]


def _fails_in_a_worker(path: str) -> str:
    if path.endswith("3.py") and os.getpid() != PARENT:
        raise RuntimeError("a worker's bug")
    return path[::-1]


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _map(function, paths, start_after: int = 50):  # type: ignore[no-untyped-def]
    return parallel.map_paths(function, paths, start_after=start_after, initializer=_configure, initargs=(3,))


needs_cores = pytest.mark.skipif(parallel.cores() < 2, reason="one core: no workers are started")


@needs_cores
def test_every_path_is_answered_once_by_the_workers() -> None:
    results = _map(_answer, PATHS)
    assert {path: value for path, (value, _, _) in results.items()} == {path: path.upper() + "3" for path in PATHS}
    workers = {pid for _, pid, _ in results.values()}
    assert PARENT not in workers and len(workers) >= 2


@needs_cores
def test_workers_check_paths_while_more_are_still_coming() -> None:
    last_yield: list[float] = []

    def slowly_found() -> Iterator[str]:
        for path in PATHS:
            time.sleep(0.0002)
            last_yield[:] = [time.monotonic()]
            yield path

    results = _map(_answer, slowly_found())
    assert len(results) == len(PATHS)
    assert min(finished for _, _, finished in results.values()) < last_yield[0]


def test_a_small_run_stays_in_this_process() -> None:
    results = _map(_answer, PATHS[:20])
    assert {pid for _, pid, _ in results.values()} == {PARENT}


@needs_cores
def test_a_killed_worker_loses_no_path() -> None:
    descriptors = _open_descriptors()
    assert _map(_dies_in_a_worker, PATHS) == {path: path[::-1] for path in PATHS}
    assert _open_descriptors() == descriptors


@needs_cores
def test_a_failing_worker_loses_no_path() -> None:
    assert _map(_fails_in_a_worker, PATHS) == {path: path[::-1] for path in PATHS}


def test_an_error_while_finding_paths_stops_the_workers() -> None:
    def broken() -> Iterator[str]:
        yield from PATHS[:100]
        raise FileNotFoundError("missing/")

    descriptors = _open_descriptors()
    with pytest.raises(FileNotFoundError):
        _map(_answer, broken())
    assert _open_descriptors() == descriptors
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_spawned_pool_for_platforms_without_fork() -> None:
    # Spawned workers import what they run: builtins keep the test independent of this module's path.
    results = parallel._map_in_spawned_pool(str.upper, PATHS[:40], 2, int, ())
    assert results == [path.upper() for path in PATHS[:40]]
