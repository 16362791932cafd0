"""Checking files in parallel across cores: the gate's only use of a process pool."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


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
    if workers < 2 or len(jobs) < 2:
        initializer(*initargs)
        return [function(job) for job in jobs]
    # fork shares the already imported engine with the workers; it is the cheap start where it is safe.
    method = "fork" if sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    # Small chunks: a few large files hold most of the work, and one chunk must not hold them all.
    chunk = max(1, len(jobs) // (workers * 16))
    with context.Pool(workers, initializer=initializer, initargs=initargs) as pool:
        return pool.map(function, jobs, chunksize=chunk)
