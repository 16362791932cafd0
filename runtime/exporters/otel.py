"""OpenTelemetry spans of the runtime's jobs, made by an ``on_event`` hook (``pip install 'corral[otel]'``).

Owns what a span of one attempt holds: its name (``corral.job <kind>``), its start and end (the attempt's
code, from the event's timing), its attributes (``corral.job.id``, ``.kind``, ``.queue``, ``.attempt``,
``.max_attempts``, ``.outcome``, ``.queued_seconds``, ``.retry_in_seconds``, ``.released_because``)
and, when it failed, its error (an ``exception`` event and an ERROR status). Spans are made once
the attempt has ended, from its end event, on the hooks' thread; which exporter sends them is the
application's tracer provider's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.runtime.events import ATTEMPT_ENDS, Event, JobEvent
from corral.runtime.exporters import import_extra

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["JobSpans"]

_NS = 1_000_000_000
# Ends whose error is the job's (a released attempt's is why this process recorded no outcome).
_FAILED = frozenset({"failed", "retried"})


class JobSpans:
    """An ``on_event`` hook that records one span per ended attempt with ``tracer_provider`` (default: the
    global one, ``opentelemetry.trace.get_tracer_provider()``)."""

    def __init__(self, *, tracer_provider: TracerProvider | None = None) -> None:
        self._trace = import_extra("opentelemetry.trace", extra="otel")
        self._tracer = self._trace.get_tracer("corral.runtime", tracer_provider=tracer_provider)

    def __call__(self, event: Event) -> None:
        if isinstance(event, JobEvent) and event.name in ATTEMPT_ENDS:
            self._span(event)

    def _span(self, event: JobEvent) -> None:
        ran = event.duration or 0.0
        attributes: dict[str, str | int | float] = {
            "corral.job.id": event.job_id,
            "corral.job.kind": event.kind,
            "corral.job.queue": event.queue,
            "corral.job.attempt": event.attempt,
            "corral.job.max_attempts": event.max_attempts,
            "corral.job.outcome": event.name,
            "corral.job.queued_seconds": event.queued_for,
        }
        if event.retry_in is not None:
            attributes["corral.job.retry_in_seconds"] = event.retry_in
        if event.name == "released" and event.error is not None:
            attributes["corral.job.released_because"] = event.error
        span = self._tracer.start_span(
            f"corral.job {event.kind}", attributes=attributes, start_time=int((event.at - ran) * _NS)
        )
        if event.name in _FAILED and event.error is not None:
            error_type, _, message = event.error.partition(": ")
            span.add_event("exception", {"exception.type": error_type, "exception.message": message or error_type})
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error))
        span.end(end_time=int(event.at * _NS))
