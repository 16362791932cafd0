"""What the dashboard's pages show, computed from the store's records and the runtime's declarations: each
queue's limits and counts, running jobs' elapsed time against their kind's timeout, and the attempts that
ended per minute as the bars of a small SVG chart. Pure functions: the app fetches, these shape."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corral.runtime.declarations import JobKind, Queue
from corral.runtime.stores.protocol import DONE, STATES, JobRecord, QueueCounts

__all__ = ["Bar", "QueueRow", "RunningRow", "queue_rows", "running_rows", "throughput_bars"]

CHART_MINUTES = 15
CHART_WIDTH = 600
CHART_HEIGHT = 80


@dataclass(frozen=True)
class QueueRow:
    name: str
    max_workers: int | None  # None: a queue the store has jobs of that this runtime does not declare
    timeout: float | None
    per_key: int | None
    counts: dict[str, int]


@dataclass(frozen=True)
class RunningRow:
    job: JobRecord
    elapsed: float
    timeout: float | None  # None: a kind this runtime does not declare
    percent: int  # of the timeout elapsed, capped at 100


@dataclass(frozen=True)
class Bar:
    """One minute of the chart: ``done`` and ``failed`` attempts (retrying ones count as failed) as two
    stacked rectangles, in the SVG's coordinates."""

    minute: str
    done: int
    failed: int
    x: float
    width: float
    done_y: float
    done_height: float
    failed_y: float
    failed_height: float


def queue_rows(queues: Mapping[str, Queue], found: Mapping[str, QueueCounts]) -> list[QueueRow]:
    rows = [
        QueueRow(
            name=name,
            max_workers=queue.max_workers,
            timeout=queue.timeout,
            per_key=queue.per_key,
            counts=_counts(found.get(name)),
        )
        for name, queue in queues.items()
    ]
    rows += [
        QueueRow(name=name, max_workers=None, timeout=None, per_key=None, counts=_counts(counts))
        for name, counts in sorted(found.items())
        if name not in queues
    ]
    return rows


def _counts(counts: QueueCounts | None) -> dict[str, int]:
    return {state: getattr(counts or QueueCounts(), state) for state in STATES}


def running_rows(jobs: Sequence[JobRecord], kinds: Mapping[str, JobKind], *, now: float) -> list[RunningRow]:
    rows: list[RunningRow] = []
    for job in jobs:
        elapsed = max(0.0, now - (job.started_at if job.started_at is not None else now))
        kind = kinds.get(job.kind)
        timeout = None if kind is None else kind.timeout
        percent = 0 if timeout is None else min(100, int(100 * elapsed / timeout))
        rows.append(RunningRow(job=job, elapsed=elapsed, timeout=timeout, percent=percent))
    return rows


def throughput_bars(ended: Sequence[tuple[str, str, float]], *, now: float) -> list[Bar]:
    """The last :data:`CHART_MINUTES` whole minutes and the current one, oldest first."""
    this_minute = math.floor(now / 60)
    first = this_minute - CHART_MINUTES
    done = [0] * (CHART_MINUTES + 1)
    failed = [0] * (CHART_MINUTES + 1)
    for _, outcome, finished_at in ended:
        index = math.floor(finished_at / 60) - first
        if 0 <= index <= CHART_MINUTES:
            if outcome == DONE:
                done[index] += 1
            else:
                failed[index] += 1
    tallest = max([1, *(d + f for d, f in zip(done, failed, strict=True))])
    slot = CHART_WIDTH / (CHART_MINUTES + 1)
    bars: list[Bar] = []
    for index in range(CHART_MINUTES + 1):
        done_height = CHART_HEIGHT * done[index] / tallest
        failed_height = CHART_HEIGHT * failed[index] / tallest
        minute_seconds = (first + index) * 60
        bars.append(
            Bar(
                minute=_clock(minute_seconds),
                done=done[index],
                failed=failed[index],
                x=index * slot + 1,
                width=slot - 2,
                done_y=CHART_HEIGHT - done_height,
                done_height=done_height,
                failed_y=CHART_HEIGHT - done_height - failed_height,
                failed_height=failed_height,
            )
        )
    return bars


def _clock(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"
