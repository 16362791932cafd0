"""The runtime's events and their hooks: what happened to a job, to the rescue, to the event loop, for ``on_event``.

Owns the event types (:class:`JobEvent`, :class:`RescueEvent`, :class:`StallEvent`), the checks of the
``on_event`` hooks a runtime is given, their delivery (:class:`EventHooks`), and the structured fields
of the log lines about a job (:func:`log_fields`). Hooks never run on the
event loop: each event is queued for one delivery thread that calls every hook in order, so a slow hook
delays only the events behind it and a hook that raises is logged and the others still run. At most
:data:`EVENT_BACKLOG` events wait; beyond that the runtime drops events (never jobs), counts them and
logs a WARNING, rather than let a hook that cannot keep up grow the process's memory without bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from corral.runtime.errors import ConfigError
from corral.runtime.infra import DeliveryThread
from corral.runtime.stores.protocol import ClaimedJob

__all__ = [
    "ATTEMPT_ENDS",
    "EVENT_BACKLOG",
    "Event",
    "EventHook",
    "EventHooks",
    "JobEvent",
    "JobEventName",
    "RescueEvent",
    "StallEvent",
    "check_hooks",
    "log_fields",
]

log = logging.getLogger("corral.runtime")

# Events that may wait for the hooks at once (about 200 bytes each): minutes of a busy runtime's events.
EVENT_BACKLOG = 100_000

# Seconds stop() lets the hooks take the events still queued before it leaves them behind.
EVENT_DRAIN = 5.0

JobEventName: TypeAlias = Literal["started", "succeeded", "failed", "retried", "released", "snoozed", "cancelled"]

# The events that end an attempt that started: each ``started`` is followed by exactly one of them.
ATTEMPT_ENDS: frozenset[JobEventName] = frozenset({"succeeded", "failed", "retried", "released", "cancelled"})


@dataclass(frozen=True, kw_only=True)
class JobEvent:
    """Something happened to one attempt of a job.

    ``name``: ``started`` (its code starts), ``succeeded`` (its result is stored), ``failed`` (failed for
    good: its last attempt failed, it raised ``Discard``, or it asked for too many ``Retry``), ``retried``
    (the attempt ended and the job runs again in ``retry_in`` seconds: after an error, or because it raised
    ``Retry``, then ``error`` is None), ``released`` (the attempt ended without an outcome this process
    recorded, ``error`` says why: the hard stop interrupted it, or the store refused or could not take its
    outcome; the job runs again, released or rescued), ``snoozed`` (put back without running: its key was
    busy, or an earlier attempt still runs here), ``cancelled`` (it was cancelled). Every ``started`` is
    followed by exactly one of ``succeeded``, ``failed``, ``retried``, ``released``, ``cancelled``.
    ``queued_for``: seconds from when the job was due to this attempt's claim; ``duration``: seconds its
    code ran (None before it ran)."""

    name: JobEventName
    job_id: int
    kind: str
    queue: str
    attempt: int
    max_attempts: int
    at: float
    queued_for: float
    duration: float | None = None
    error: str | None = None
    retry_in: float | None = None


@dataclass(frozen=True, kw_only=True)
class RescueEvent:
    """A rescue pass made ``count`` running jobs whose lease expired retryable (or failed when out of
    attempts). The stores report how many, not which: the jobs are in the store's records."""

    name: Literal["rescued"] = "rescued"
    count: int
    at: float


@dataclass(frozen=True, kw_only=True)
class StallEvent:
    """The event loop was held for ``duration`` seconds (a blocking call in async code): every queue this
    process works (``queues``) was stalled meanwhile. Reported once the loop runs again."""

    name: Literal["stalled"] = "stalled"
    queues: tuple[str, ...]
    duration: float
    at: float


Event: TypeAlias = JobEvent | RescueEvent | StallEvent
EventHook: TypeAlias = Callable[[Event], object]


def check_hooks(on_event: EventHook | Sequence[EventHook] | None) -> tuple[EventHook, ...]:
    """``on_event`` as a tuple of hooks: one callable, several, or none; anything else is a ConfigError."""
    if on_event is None:
        return ()
    if callable(on_event):
        return (on_event,)
    if isinstance(on_event, (str, bytes)) or not isinstance(on_event, Sequence):
        raise ConfigError(f"on_event must be a callable or a sequence of callables, got {on_event!r}")
    for hook in on_event:
        if not callable(hook):
            raise ConfigError(f"on_event must be a callable or a sequence of callables, got {hook!r} in it")
    return tuple(on_event)


def log_fields(job: ClaimedJob, duration: float | None = None) -> dict[str, object]:
    """The structured fields of a log line about an attempt of ``job`` (a record's ``extra``)."""
    fields: dict[str, object] = {"job_id": job.id, "kind": job.kind, "queue": job.queue, "attempt": job.attempt}
    if duration is not None:
        fields["duration_ms"] = round(duration * 1000.0, 3)
    return fields


def _hook_name(hook: EventHook) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)


class EventHooks:
    """Delivers the runtime's events to its hooks, on a thread of their own, from :meth:`start` to :meth:`stop`.

    Without hooks nothing is built or queued. Events emitted before :meth:`start` or after :meth:`stop`
    wait in the backlog (delivered at the next start) or are dropped with the process."""

    def __init__(self, hooks: Sequence[EventHook]) -> None:
        self._hooks = tuple(hooks)
        self._thread = DeliveryThread(self._deliver, name="corral-event-hooks", capacity=EVENT_BACKLOG)
        self.dropped = 0

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def start(self) -> None:
        if self._hooks:
            self._thread.start()

    async def stop(self) -> None:
        """Deliver the queued events, for :data:`EVENT_DRAIN` seconds at most."""
        if self._hooks and not await self._thread.stop(timeout=EVENT_DRAIN):
            log.warning("event hooks: events still queued %gs after stop(); left to the hook thread", EVENT_DRAIN)

    def emit(self, event: Event) -> None:
        if not self._hooks or self._thread.post(event):
            return
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 10_000 == 0:
            log.warning(
                "event hooks cannot keep up: %d event(s) dropped so far (%d wait for the hooks)",
                self.dropped,
                EVENT_BACKLOG,
            )

    def job(
        self,
        name: JobEventName,
        job: ClaimedJob,
        *,
        duration: float | None = None,
        error: str | None = None,
        retry_in: float | None = None,
    ) -> None:
        """Emit ``name`` for an attempt of ``job`` whose code ran ``duration`` seconds (None: it did not run)."""
        if not self._hooks:
            return
        now = time.time()
        began = now - (duration or 0.0)
        self.emit(
            JobEvent(
                name=name,
                job_id=job.id,
                kind=job.kind,
                queue=job.queue,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                at=now,
                queued_for=max(began - job.run_at, 0.0),
                duration=duration,
                error=error,
                retry_in=retry_in,
            )
        )

    def _deliver(self, event: Event) -> None:
        for hook in self._hooks:
            try:
                hook(event)
            except BaseException:  # a broken hook must not break the runtime, this thread or the hooks after it
                log.exception("event hook %s raised on a %r event; going on", _hook_name(hook), event.name)
