"""What the operator's tools (``corral jobs``, ``corral ui``) share: opening a runtime's store without ever
creating it, durations and times as operators write them, and the store's records as JSON-ready objects.

The JSON shapes are one contract for both tools: times are ISO-8601 in UTC (``null`` when unset),
arguments and results are JSON values (never JSON text inside a string), every queue the runtime declares
has every state counted (zeros included), and each document carries ``"version": FORMAT_VERSION``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any

from corral.runtime.stores.protocol import STATES, AttemptRecord, JobRecord, KeyLease, QueueCounts, Store

__all__ = [
    "FORMAT_VERSION",
    "attempt_json",
    "counts_json",
    "iso_time",
    "job_json",
    "lease_json",
    "opened_store",
    "parse_duration",
    "parse_since",
]

FORMAT_VERSION = 1

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``45``, ``45s``, ``30m``, ``12h``, ``7d``, ``2w`` in seconds; ``ValueError`` saying what is accepted."""
    matched = _DURATION.match(text.strip().lower())
    if matched is None:
        raise ValueError(f"expected a duration such as 45s, 30m, 12h, 7d or 2w, got {text!r}")
    return float(matched.group(1)) * _UNIT_SECONDS[matched.group(2)]


def parse_since(text: str, *, now: float) -> float:
    """A moment as Unix seconds: a duration before ``now`` (``1h``) or an ISO-8601 time (UTC when it
    names no offset)."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a duration ago (1h, 2d) or an ISO-8601 time (2026-12-01T09:30), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def iso_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def _json_value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def job_json(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.id,
        "queue": job.queue,
        "kind": job.kind,
        "state": job.state,
        "args": _json_value(job.args_json),
        "key": job.key,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "crashes": job.crashes,
        "enqueued_at": iso_time(job.enqueued_at),
        "run_at": iso_time(job.run_at),
        "started_at": iso_time(job.started_at),
        "finished_at": iso_time(job.finished_at),
        "lease_until": iso_time(job.lease_until),
        "worker_id": job.worker_id,
        "result": _json_value(job.result_json),
        "error": job.error,
        "traceback": job.traceback,
    }


def attempt_json(attempt: AttemptRecord) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt,
        "outcome": attempt.outcome,
        "worker_id": attempt.worker_id,
        "started_at": iso_time(attempt.started_at),
        "finished_at": iso_time(attempt.finished_at),
        "error": attempt.error,
        "traceback": attempt.traceback,
        "crashed": attempt.crashed,
    }


def lease_json(lease: KeyLease) -> dict[str, Any]:
    return {
        "queue": lease.queue,
        "key": lease.key,
        "slot": lease.slot,
        "holder": lease.holder,
        "busy_until": iso_time(lease.busy_until),
    }


def counts_json(declared: list[str], found: Mapping[str, QueueCounts]) -> dict[str, dict[str, int]]:
    """Every declared queue, then any other queue the store has jobs of, each with every state."""
    names = list(dict.fromkeys([*declared, *sorted(found)]))
    return {name: {state: getattr(found.get(name, QueueCounts()), state) for state in STATES} for name in names}


@asynccontextmanager
async def opened_store(store: Store, *, read_only: bool) -> AsyncIterator[Store]:
    """``store`` opened as it exists (:meth:`Store.open_existing`), closed when the block ends."""
    await store.open_existing(read_only=read_only)
    try:
        yield store
    finally:
        await store.close()
