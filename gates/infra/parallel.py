"""Checking files in parallel across cores: the gate's only use of processes.

On Linux the workers are forked: they inherit the loaded engine and the run's settings, and cost about a
millisecond each to start. They draw job numbers from one queue (a memory file whose read offset they
share, so each read takes the next numbers and no two workers take the same), which balances a worker
that drew large files against one that drew small ones; each sends its results back, pickled, on a pipe
of its own. A worker that fails or dies leaves its jobs unanswered, and those run again here, in this
process: a crashed worker can slow a run down, never drop a file from it. Elsewhere, a process pool that
spawns its workers.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")

_NUMBER_SIZE = 4


def map_in_processes(
    function: Callable[[Job], Result],
    jobs: Sequence[Job],
    *,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> list[Result]:
    """`[function(job) for job in jobs]` spread over the machine's cores, in order; `initializer(*initargs)`
    runs first in every worker (and here, when one core does it all)."""
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 32)
    workers = min(workers, len(jobs))
    if workers < 2:
        initializer(*initargs)
        return [function(job) for job in jobs]
    if sys.platform != "linux":
        return _map_in_spawned_pool(function, jobs, workers, initializer, initargs)
    # Forked workers inherit what the initializer sets up here.
    initializer(*initargs)
    return _map_in_forks(function, jobs, workers)


def _map_in_forks(function: Callable[[Job], Result], jobs: Sequence[Job], workers: int) -> list[Result]:
    queue = os.memfd_create("corral-jobs", os.MFD_CLOEXEC)
    try:
        numbers = b"".join(number.to_bytes(_NUMBER_SIZE, "little") for number in range(len(jobs)))
        written = 0
        while written < len(numbers):
            written += os.write(queue, numbers[written:])
        os.lseek(queue, 0, os.SEEK_SET)
        sys.stdout.flush()
        sys.stderr.flush()
        children: list[tuple[int, int]] = []
        try:
            for _ in range(workers):
                reader, writer = os.pipe()
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the worker's side; its results are checked by the parent
                    os.close(reader)
                    _work(function, jobs, queue, writer)
                os.close(writer)
                children.append((pid, reader))
            results: dict[int, Result] = {}
            for pid, reader in children:
                results.update(_collect(pid, reader))
        finally:
            for pid, reader in children:
                _reap(pid, reader)
    finally:
        os.close(queue)
    # Jobs a failed worker took and never answered run here.
    return [results[number] if number in results else function(job) for number, job in enumerate(jobs)]


def _work(function: Callable[[Job], Result], jobs: Sequence[Job], queue: int, writer: int) -> None:
    """A worker's whole life: take job numbers until the queue is empty, then send every result at once."""
    status = 1
    try:
        done: list[tuple[int, Result]] = []
        while number := os.read(queue, _NUMBER_SIZE):
            index = int.from_bytes(number, "little")
            done.append((index, function(jobs[index])))
        with os.fdopen(writer, "wb") as out:
            pickle.dump(done, out, protocol=pickle.HIGHEST_PROTOCOL)
        status = 0
    finally:
        # Never return into the parent's code, and never flush the parent's buffered output twice.
        os._exit(status)


def _collect(pid: int, reader: int) -> dict[int, Result]:
    """One worker's results; empty when it did not finish (its jobs are then run again)."""
    chunks = []
    while chunk := os.read(reader, 1 << 20):
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return {}
    try:
        return dict(pickle.loads(b"".join(chunks)))
    except (pickle.UnpicklingError, EOFError, ValueError):
        return {}


def _reap(pid: int, reader: int) -> None:
    """Stop and wait for a worker (already done when its results were collected) and close its pipe."""
    with contextlib.suppress(OSError):
        os.close(reader)
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _map_in_spawned_pool(
    function: Callable[[Job], Result],
    jobs: Sequence[Job],
    workers: int,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> list[Result]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    # Small chunks: a few large files hold most of the work, and one chunk must not hold them all.
    chunk = max(1, len(jobs) // (workers * 16))
    with context.Pool(workers, initializer=initializer, initargs=initargs) as pool:
        return pool.map(function, jobs, chunksize=chunk)
