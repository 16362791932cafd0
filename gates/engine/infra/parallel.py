"""Checking files in parallel across cores: the gate's only use of processes.

Paths arrive while they are still being found (a folder walk yields as it goes). The first few are kept
here; once there are enough to pay for workers, the workers are forked (on Linux: they inherit the
loaded engine, the run's settings and what every worker would otherwise compute for itself, such as a
summary of the whole project, for about a millisecond each) and every path, those kept and those still
to come, goes into one pipe as a fixed-size record that the workers draw from: finding files overlaps
with checking them, and a worker that drew large files simply draws fewer. Each worker sends its results
back as JSON (in the form the caller's `to_json` gives them), never pickled, on a pipe of its own. A
worker that fails or dies, or whose answer does not read back, leaves its paths unanswered, and those
are checked again here, in this process: a crashed worker can slow a run down, never drop a file from
it. Elsewhere than Linux, a process pool that spawns its workers, once every path is known; a pool that
lost a worker is not waited on: its paths are checked here too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain, islice
from typing import Any, TypeVar

Result = TypeVar("Result")

# Where workers are forked (they inherit the loaded engine); elsewhere a pool spawns them.
FORKS = sys.platform == "linux"


def cores() -> int:
    return min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 32)


def map_paths(
    function: Callable[[str], Result],
    paths: Iterable[str],
    *,
    start_after: int,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
    to_json: Callable[[Result], Any],
    from_json: Callable[[str, Any], Result],
    shared: Callable[[], None] | None = None,
) -> dict[str, Result]:
    """`{path: function(path)}` for every path `paths` yields, spread over the machine's cores once
    `start_after` paths have come (a smaller run is checked here, on one core). `initializer(*initargs)`
    runs first, here and in every worker. A result crosses between processes as `to_json(result)`, read
    back here as `from_json(path, data)`, which raises ValueError, TypeError, KeyError or AttributeError
    for data that does not read back (that worker's paths are then checked again here). `shared()` runs
    here, once, before forked workers start, and only then: what every worker would otherwise compute for
    itself, which each inherits instead (spawned workers inherit nothing, and a run in this process
    computes only what it needs)."""
    coming = iter(paths)
    first = list(islice(coming, start_after))
    workers = cores()
    # Here whichever way the paths are checked: `from_json` may read what it sets up; forked workers inherit it.
    initializer(*initargs)
    if len(first) < start_after or workers < 2:
        return {path: function(path) for path in chain(first, coming)}
    if not FORKS:
        everything = [*first, *coming]
        answers = _map_in_spawned_pool(partial(_encoded, function, to_json), everything, workers, initializer, initargs)
        if answers is None:  # a worker died: every path is checked here
            return {path: function(path) for path in everything}
        return {
            path: _read_back(function, from_json, path, answer)
            for path, answer in zip(everything, answers, strict=True)
        }
    if shared is not None:
        shared()
    return _map_in_forks(function, chain(first, coming), workers, to_json, from_json)


def _encoded(function: Callable[[str], Result], to_json: Callable[[Result], Any], path: str) -> str:
    return json.dumps(to_json(function(path)))


def _read_back(
    function: Callable[[str], Result], from_json: Callable[[str, Any], Result], path: str, answer: str
) -> Result:
    """A spawned worker's answer for `path`, or the path checked here when the answer does not read back."""
    try:
        return from_json(path, json.loads(answer))
    except (ValueError, TypeError, KeyError, AttributeError):
        return function(path)


def _map_in_forks(
    function: Callable[[str], Result],
    paths: Iterator[str],
    workers: int,
    to_json: Callable[[Result], Any],
    from_json: Callable[[str, Any], Result],
) -> dict[str, Result]:
    queue_reader, queue_writer = os.pipe()
    # A write of at most PIPE_BUF bytes reaches the pipe whole, so a record read is always one record.
    record_size = os.fpathconf(queue_writer, "PC_PIPE_BUF")
    sys.stdout.flush()
    sys.stderr.flush()
    children: list[tuple[int, int]] = []
    sent: list[str] = []
    results: dict[str, Result] = {}
    open_ends = [queue_reader, queue_writer]
    try:
        for _ in range(workers):
            reader, writer = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the worker's side; its results are checked by the parent
                os.close(reader)
                os.close(queue_writer)
                _work(partial(_encoded, function, to_json), queue_reader, record_size, writer)
            os.close(writer)
            children.append((pid, reader))
        _close(open_ends, queue_reader)
        queue_open = True
        for path in paths:
            sent.append(path)
            record = os.fsencode(path)
            # A path as long as a record cannot be opened anyway; checking it here reports why.
            if queue_open and len(record) < record_size:
                try:
                    os.write(queue_writer, record.ljust(record_size, b"\0"))
                except BrokenPipeError:  # every worker is gone: the rest is checked here
                    queue_open = False
        _close(open_ends, queue_writer)
        for pid, reader in children:
            results.update(_collect(pid, reader, from_json))
    finally:
        for end in open_ends:
            os.close(end)
        for pid, reader in children:
            _reap(pid, reader)
    # Paths a failed worker took and never answered are checked here.
    for path in sent:
        if path not in results:
            results[path] = function(path)
    return results


def _close(open_ends: list[int], end: int) -> None:
    open_ends.remove(end)
    os.close(end)


def _work(encoded: Callable[[str], str], queue: int, record_size: int, writer: int) -> None:
    """A worker's whole life: draw paths until the queue is closed and empty, then send every result, one
    JSON array of `[path, result]` pairs (each result already JSON text)."""
    status = 1
    try:
        done: list[str] = []
        while record := os.read(queue, record_size):
            path = os.fsdecode(record.rstrip(b"\0"))
            done.append(f"[{json.dumps(path)},{encoded(path)}]")
        with os.fdopen(writer, "w", encoding="utf-8") as out:
            out.write(f"[{','.join(done)}]")
        status = 0
    finally:
        # Never return into the parent's code, and never flush the parent's buffered output twice.
        os._exit(status)


def _collect(pid: int, reader: int, from_json: Callable[[str, Any], Result]) -> dict[str, Result]:
    """One worker's results; empty when it did not finish or its answer does not read back (its paths are
    then checked again)."""
    chunks = []
    while chunk := os.read(reader, 1 << 20):
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return {}
    try:
        return {path: from_json(path, data) for path, data in json.loads(b"".join(chunks))}
    except (ValueError, TypeError, KeyError, AttributeError):
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
    encoded: Callable[[str], str],
    paths: Sequence[str],
    workers: int,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> list[str] | None:
    """Each path's answer from a pool of spawned workers; None when one of them died (killed, crashed, its
    initializer failed): a pool that lost a worker is broken, never waited on for ever."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    # Small chunks: a few large files hold most of the work, and one chunk must not hold them all.
    chunk = max(1, len(paths) // (workers * 16))
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs) as pool:
            return list(pool.map(encoded, paths, chunksize=chunk))
    except BrokenProcessPool:
        return None
