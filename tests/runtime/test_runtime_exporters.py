"""The Prometheus and OpenTelemetry exporters, each against its real library, fed by a real runtime's events.

Prometheus: the metrics read back from a ``prometheus_client`` registry of the test's own. OpenTelemetry:
the spans a real SDK tracer provider hands to its ``InMemorySpanExporter``. And the runtime, the
exporters' modules too, import without either library.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from corral.runtime import ConfigError, Discard, JobContext, Queue
from corral.runtime.exporters.otel import JobSpans
from corral.runtime.exporters.prometheus import PrometheusMetrics
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from runtime_helpers import SqliteBackend, make_runtime


def _run_three_jobs(tmp_path: Path, hook: Any) -> dict[str, int]:
    """One job that succeeds after 50 ms, one that fails twice (retried, then failed), one discarded."""
    db = SqliteBackend(tmp_path / "jobs.db")
    queue = Queue("m", max_workers=2, timeout=5)

    @queue.job("ex.ok")
    async def ok(ctx: JobContext) -> None:
        await asyncio.sleep(0.05)

    @queue.job("ex.bad", max_attempts=2)
    async def bad(ctx: JobContext) -> None:
        raise ValueError(f"bad input {ctx.attempt}")

    @queue.job("ex.drop")
    async def drop(ctx: JobContext) -> None:
        raise Discard("not wanted")

    async def main() -> dict[str, int]:
        async with make_runtime(db, [queue], on_event=hook) as runtime:
            ids = {kind: await runtime.enqueue(kind) for kind in ("ex.ok", "ex.bad", "ex.drop")}
            for job_id in ids.values():
                await runtime.wait(job_id, timeout=10)
        return ids  # stop() delivered every event to the hook

    return asyncio.run(main())


def test_prometheus_counts_outcomes_durations_and_in_flight_attempts(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    _run_three_jobs(tmp_path, PrometheusMetrics(registry=registry))

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("corral_jobs_total", kind="ex.ok", queue="m", outcome="succeeded") == 1
    assert sample("corral_jobs_total", kind="ex.bad", queue="m", outcome="retried") == 1
    assert sample("corral_jobs_total", kind="ex.bad", queue="m", outcome="failed") == 1
    assert sample("corral_jobs_total", kind="ex.drop", queue="m", outcome="failed") == 1
    assert sample("corral_jobs_total", kind="ex.ok", queue="m", outcome="failed") is None
    assert sample("corral_job_duration_seconds_count", kind="ex.ok", queue="m", outcome="succeeded") == 1
    assert 0.05 <= (sample("corral_job_duration_seconds_sum", kind="ex.ok", queue="m", outcome="succeeded") or 0) < 1
    assert sample("corral_job_queued_seconds_count", kind="ex.bad", queue="m") == 2  # two attempts started
    for kind in ("ex.ok", "ex.bad", "ex.drop"):
        assert sample("corral_jobs_in_flight", kind=kind, queue="m") == 0  # every start ended
    assert sample("corral_jobs_rescued_total") == 0


def test_opentelemetry_records_a_span_per_attempt_with_its_error(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ids = _run_three_jobs(tmp_path, JobSpans(tracer_provider=provider))
    spans = sorted(exporter.get_finished_spans(), key=lambda span: (span.name, span.attributes["corral.job.attempt"]))
    assert [(span.name, span.attributes["corral.job.outcome"]) for span in spans] == [
        ("corral.job ex.bad", "retried"),
        ("corral.job ex.bad", "failed"),
        ("corral.job ex.drop", "failed"),
        ("corral.job ex.ok", "succeeded"),
    ]
    retried, failed, dropped, ok = spans
    assert dict(ok.attributes) == {
        "corral.job.id": ids["ex.ok"],
        "corral.job.kind": "ex.ok",
        "corral.job.queue": "m",
        "corral.job.attempt": 1,
        "corral.job.max_attempts": 5,
        "corral.job.outcome": "succeeded",
        "corral.job.queued_seconds": ok.attributes["corral.job.queued_seconds"],
    }
    assert ok.status.status_code is StatusCode.UNSET and not ok.events
    assert 0.05e9 <= ok.end_time - ok.start_time < 1e9  # the attempt's code, 50 ms of sleep
    assert retried.attributes["corral.job.retry_in_seconds"] > 0
    assert (failed.status.status_code, failed.status.description) == (StatusCode.ERROR, "ValueError: bad input 2")
    (exception,) = failed.events
    assert (exception.name, dict(exception.attributes)) == (
        "exception",
        {"exception.type": "ValueError", "exception.message": "bad input 2"},
    )
    assert dropped.status.description == "Discard: not wanted"


@pytest.mark.parametrize(
    ("exporter", "extra"), [("prometheus.PrometheusMetrics", "prometheus"), ("otel.JobSpans", "otel")]
)
def test_the_runtime_runs_without_the_exporters_libraries(exporter: str, extra: str) -> None:
    module, name = exporter.split(".")
    script = f"""
import asyncio, sys
sys.modules["prometheus_client"] = None  # as if not installed: importing it raises ImportError
sys.modules["opentelemetry"] = None
sys.modules["opentelemetry.trace"] = None
from corral.runtime import ConfigError, Queue, Runtime
from corral.runtime.exporters.{module} import {name}
queue = Queue("q", max_workers=1, timeout=5)

@queue.job("k")
async def k(ctx) -> int:
    return 7

async def main() -> None:
    async with Runtime(queues=[queue], store="memory://") as runtime:
        print((await runtime.wait(await runtime.enqueue("k"), timeout=5)).result)
asyncio.run(main())
try:
    {name}()
except ConfigError as exc:
    print(exc)
"""
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == "7"
    assert f"is not installed: pip install 'corral[{extra}]'" in lines[1]


def test_a_missing_library_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ConfigError, match=r"prometheus_client is not installed: pip install 'corral\[prometheus\]'"):
        PrometheusMetrics()
