"""CRL201-CRL204: every job kind has a hard timeout, provable statically as a positive number.

The kinds and their effective timeouts come from `corral.gates.frameworks.jobs` (one place for every framework);
this rule turns failing kinds into findings on the declaring decorator or call, and records every kind as
a `JobKindFact`. Its project half, `corral.gates.rules.job_report`, reads the facts into the jobs report
(`corral jobs --static`, the json `jobs` section).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks import jobs
from corral.gates.frameworks.jobs import job_kinds
from corral.gates.rules.base import Fact, Rule
from corral.gates.source.prefilter import Source

# Every job kind is declared by a decorator or call whose name is written in the file: a method of an app,
# queue or broker (`.task`, `.job`, `.periodic`, `.db_task`...; the object may come from a project module),
# or a name imported from a framework (`shared_task`, `actor`, `job`, `task` of djhuey). arq's and SAQ's
# settings and crons can be spelled in more ways than are worth looking for: a file importing either is
# always read.
_DECLARING_WORDS = (b"task", b"job", b"periodic", b"actor")
_FRAMEWORKS = (b"celery", b"dramatiq", b"rq", b"huey", b"taskiq", b"procrastinate", b"corral")
_SETTINGS_FRAMEWORKS = (b"arq", b"saq")
_METHOD_NAMES = re.compile(rb"(?:job|periodic|task|periodic_task|db_task|db_periodic_task)\b")


def might_declare_jobs(source: Source) -> bool:
    """False only when no job kind can be declared in the file: the prefilter of every CRL2 rule."""
    if source.imports_any(*_SETTINGS_FRAMEWORKS):
        return True
    if not source.has(*_DECLARING_WORDS):
        return False
    return source.imports_any(*_FRAMEWORKS) or (
        source.has(b"job", b"periodic", b"task") and _names_a_method(source.data)
    )


def _names_a_method(data: bytes) -> bool:
    """One of the method names right after a dot (`app.task`, also `app. task`, across a line break or a
    continuation, past a comment ending the line before)."""
    for match in _METHOD_NAMES.finditer(data):
        before = match.start() - 1
        while before >= 0:
            byte = data[before]
            if byte in b" \t\x0c\\\r":
                before -= 1
            elif byte == ord("\n"):
                line_start = data.rfind(b"\n", 0, before) + 1
                comment = data.find(b"#", line_start, before)
                before = (comment if comment != -1 else before) - 1
            else:
                break
        if before >= 0 and data[before] == ord("."):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class JobKindFact(Fact):
    """One job kind as the jobs report shows it: its effective hard timeout in seconds (None: none
    proven), where that comes from, and the code it fails with (None when it passes)."""

    KIND: ClassVar[str] = "jobs"

    framework: str
    kind: str
    queue: str | None
    timeout: float | None
    source: str | None
    line: int
    function: str | None
    code: str | None


class JobTimeouts(Rule):
    """The per-file half of CRL2's timeouts: a finding per failing job kind, a `JobKindFact` per kind."""

    NO_CORRAL_TIMEOUT: ClassVar[str] = "CRL201"
    NO_CELERY_TIME_LIMIT: ClassVar[str] = "CRL202"
    NO_FRAMEWORK_LIMIT: ClassVar[str] = "CRL203"
    UNRESOLVED: ClassVar[str] = "CRL204"
    codes: ClassVar[dict[str, str]] = {
        NO_CORRAL_TIMEOUT: "a corral job kind without a positive timeout (from the job or its queue)",
        NO_CELERY_TIME_LIMIT: "a Celery task without a hard time_limit (decorator, base class or app configuration)",
        NO_FRAMEWORK_LIMIT: "a job kind whose framework limit is turned off, absent, or not explicit under strict mode",
        UNRESOLVED: "a job or network timeout the gate cannot resolve statically",
    }
    # The code each way of failing that `frameworks.jobs` tells apart is reported under.
    CODE_FOR_FAILURE: ClassVar[dict[str, str]] = {
        jobs.CORRAL: NO_CORRAL_TIMEOUT,
        jobs.CELERY: NO_CELERY_TIME_LIMIT,
        jobs.OTHER: NO_FRAMEWORK_LIMIT,
        jobs.UNRESOLVED: UNRESOLVED,
    }

    VALID = (
        """
        from corral.runtime import Queue
        index = Queue("index", max_workers=4, timeout=30)
        @index.job("corpus.index")
        async def corpus_index(ctx, note_id): ...
        """,
        """
        from datetime import timedelta
        from celery import shared_task
        LIMIT = timedelta(minutes=2)
        @shared_task(time_limit=LIMIT.total_seconds())
        def send(order_id): ...
        """,
        """
        import dramatiq
        @dramatiq.actor
        def count_words(url): ...
        """,
    )
    INVALID = (
        """
        from corral.runtime import Queue
        fetch = Queue("fetch", max_workers=3)
        @fetch.job("jobs.fetch_source")  # error: CRL201
        async def fetch_source(ctx, source_id): ...
        """,
        """
        from celery import Celery
        app = Celery("proj")
        @app.task(soft_time_limit=30)  # error: CRL202
        def resize(image_id): ...
        """,
        """
        from rq.decorators import job
        @job("low", timeout=-1)  # error: CRL203
        def crawl(url): ...
        """,
        """
        import os
        from corral.runtime import Queue
        index = Queue("index", max_workers=4, timeout=int(os.environ["INDEX_TIMEOUT"]))
        @index.job("corpus.index")  # error: CRL204
        async def corpus_index(ctx, note_id): ...
        """,
    )

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        return source.holds(might_declare_jobs)

    def check(self) -> Iterator[Finding]:
        context = self.context
        for kind in job_kinds(context):
            code = None if kind.failure is None else self.CODE_FOR_FAILURE[kind.failure]
            JobKindFact(
                framework=kind.framework,
                kind=kind.name,
                queue=kind.queue,
                timeout=kind.timeout,
                source=kind.source,
                line=kind.node.lineno,
                function=kind.function.name if kind.function is not None else None,
                code=code,
            ).record(context)
            if code is not None and kind.problem is not None:
                yield context.finding(kind.node, code, kind.problem)
