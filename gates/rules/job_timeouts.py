"""CRL201-CRL204: every job kind has a hard timeout, provable statically as a positive number.

The kinds and their effective timeouts come from `corral.gates.frameworks.jobs` (one place for every framework);
this rule turns failing kinds into findings on the declaring decorator or call, and records every kind as
a `jobs` fact for the whole-project report (`corral jobs --static`, the json `jobs` section).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks.jobs import CELERY, CORRAL, OTHER, UNRESOLVED, job_kinds
from corral.gates.rules.base import Rule
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


class JobTimeouts(Rule):
    codes: ClassVar[dict[str, str]] = {
        CORRAL: "a corral job kind without a positive timeout (from the job or its queue)",
        CELERY: "a Celery task without a hard time_limit (decorator, base class or app configuration)",
        OTHER: "a job kind whose framework limit is turned off, absent, or not explicit under strict mode",
        UNRESOLVED: "a job or network timeout the gate cannot resolve statically",
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
        @fetch.job("jobs.fetch_source")  # error: 2 CRL201 "job kind 'jobs.fetch_source' has no timeout"
        async def fetch_source(ctx, source_id): ...
        """,
        """
        from celery import Celery
        app = Celery("proj")
        @app.task(soft_time_limit=30)  # error: 2 CRL202 "task resize has no time_limit"
        def resize(image_id): ...
        """,
        """
        from rq.decorators import job
        @job("low", timeout=-1)  # error: 2 CRL203 "rq: timeout=-1 (no limit)"
        def crawl(url): ...
        """,
        """
        import os
        from corral.runtime import Queue
        index = Queue("index", max_workers=4, timeout=int(os.environ["INDEX_TIMEOUT"]))
        @index.job("corpus.index")  # error: 2 CRL204 "os.environ['INDEX_TIMEOUT']"
        async def corpus_index(ctx, note_id): ...
        """,
    )

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        return source.holds(might_declare_jobs)

    def check(self) -> Iterator[Finding]:
        context = self.context
        for kind in job_kinds(context):
            context.add_fact(
                "jobs",
                {
                    "framework": kind.framework,
                    "kind": kind.name,
                    "queue": kind.queue,
                    "timeout": kind.timeout,
                    "source": kind.source,
                    "line": kind.node.lineno,
                    "function": kind.function.name if kind.function is not None else None,
                    "code": kind.code,
                },
            )
            if kind.code is not None and kind.problem is not None:
                yield context.finding(kind.node, kind.code, kind.problem)
