"""Prometheus metrics of the runtime's jobs, kept by an ``on_event`` hook (``pip install 'corral[prometheus]'``).

Owns the metric names and what each event adds to them: a counter of ended attempts per kind, queue and
outcome (``succeeded``, ``failed``, ``retried``, ``released``, ``cancelled``, ``snoozed``), a histogram of
their durations, a histogram of how long jobs waited past their due time, a gauge of the attempts in
flight per kind and queue, and counters of rescued jobs and event-loop stalls. Serving them (an HTTP
endpoint, a push gateway) is the application's choice, as with any ``prometheus_client`` registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.runtime.events import ATTEMPT_ENDS, Event, JobEvent, RescueEvent, StallEvent
from corral.runtime.exporters import import_extra

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["PrometheusMetrics"]


class PrometheusMetrics:
    """An ``on_event`` hook that keeps the metrics in ``registry`` (default: prometheus_client's global
    one), each name starting with ``namespace``: ``corral_jobs_total{kind,queue,outcome}``,
    ``corral_job_duration_seconds{kind,queue,outcome}``, ``corral_job_queued_seconds{kind,queue}``,
    ``corral_jobs_in_flight{kind,queue}``, ``corral_jobs_rescued_total``, ``corral_loop_stalls_total``
    and ``corral_loop_stall_seconds_total``."""

    def __init__(self, *, registry: CollectorRegistry | None = None, namespace: str = "corral") -> None:
        prometheus = import_extra("prometheus_client", extra="prometheus")
        where = prometheus.REGISTRY if registry is None else registry
        labels = ("kind", "queue")
        by_outcome = (*labels, "outcome")

        def metric(kind: str, name: str, documentation: str, labelnames: tuple[str, ...] = ()) -> Any:
            return getattr(prometheus, kind)(name, documentation, labelnames, namespace=namespace, registry=where)

        self.jobs = metric("Counter", "jobs", "Attempts ended, and jobs snoozed, by outcome", by_outcome)
        self.duration = metric("Histogram", "job_duration_seconds", "Seconds an attempt's code ran", by_outcome)
        self.queued = metric("Histogram", "job_queued_seconds", "Seconds from a job's due time to its start", labels)
        self.in_flight = metric("Gauge", "jobs_in_flight", "Attempts whose code runs now", labels)
        self.rescued = metric("Counter", "jobs_rescued", "Jobs whose lease expired, made retryable (or failed)")
        self.stalls = metric("Counter", "loop_stalls", "Times the event loop was held past the watchdog's threshold")
        self.stalled_seconds = metric("Counter", "loop_stall_seconds", "Seconds the event loop was held, summed")

    def __call__(self, event: Event) -> None:
        if isinstance(event, RescueEvent):
            self.rescued.inc(event.count)
        elif isinstance(event, StallEvent):
            self.stalls.inc()
            self.stalled_seconds.inc(event.duration)
        else:
            self._job(event)

    def _job(self, event: JobEvent) -> None:
        where = (event.kind, event.queue)
        if event.name == "started":
            self.in_flight.labels(*where).inc()
            self.queued.labels(*where).observe(event.queued_for)
            return
        self.jobs.labels(*where, event.name).inc()
        if event.name in ATTEMPT_ENDS:
            self.in_flight.labels(*where).dec()
            self.duration.labels(*where, event.name).observe(event.duration or 0.0)
