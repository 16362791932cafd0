"""CRL201-CRL204: every job kind has a hard timeout, provable statically as a positive number.

The kinds and their effective timeouts come from `corral.gates.jobs` (one place for every framework);
this rule turns failing kinds into findings on the declaring decorator or call, and records every kind as
a `jobs` fact for the whole-project report (`corral jobs --static`, the json `jobs` section).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.jobs import CELERY, CORRAL, OTHER, UNRESOLVED, job_kinds
from corral.gates.prefilter import Source
from corral.gates.registry import Rule

# Every job kind is declared by a decorator or call whose resolved name ends in one of these words, written
# in the file itself (as an attribute, a name, or in the import that binds an alias): `.job`/`.periodic`
# (corral), `.task`/`shared_task`/`db_task` (Celery, Huey, taskiq, Procrastinate), `actor` (Dramatiq),
# `job` (RQ); arq's `func`/`cron` and settings, and SAQ's `CronJob` and settings, count only in a file
# that imports `arq` / `saq`.
_NAMES_OF_DECLARATIONS = (b"task", b"job", b"periodic", b"actor")
_IMPORTED_FRAMEWORKS = (b"arq", b"saq")
_METHOD_NAMES = re.compile(rb"(?:job|periodic|task|periodic_task|db_task|db_periodic_task)\b")
TRIGGERS = (b"shared_task", b"rq.decorators", b"djhuey", b"CronJob")
ARQ_WORDS = (b"func", b"cron")


def might_declare_jobs(source: Source) -> bool:
    """False only when no job kind can be declared in the file: the prefilter of every CRL2 rule."""
    if not (source.has(*_NAMES_OF_DECLARATIONS) or source.imports_any(*_IMPORTED_FRAMEWORKS)):
        return False
    data = source.data
    return (
        source.has(*TRIGGERS)
        # The regular expressions only run on files holding their words (most files hold none).
        or (source.has(b"job", b"periodic", b"task") and _names_a_method(data))
        or (source.has(b"actor", b"functions", b"cron_jobs") and _names_a_setting(data))
        or (source.imports_any(b"arq") and source.has(*ARQ_WORDS))
    )


def _names_a_setting(data: bytes) -> bool:
    """`actor` as a whole word, `"functions"` as a key, or `functions =` / `cron_jobs: ... =` assigned
    (found with `bytes.find`: a regular expression starting at a word boundary scans every position)."""
    for word in (b"actor", b"functions", b"cron_jobs"):
        position = data.find(word)
        while position != -1:
            end = position + len(word)
            before, after = data[position - 1 : position], data[end : end + 1]
            if not (before.isalnum() or before == b"_"):
                rest = data[end : end + 40].lstrip(b" \t")
                if word == b"actor" and not (after.isalnum() or after == b"_"):
                    return True
                if word != b"actor" and (
                    rest[:1] == b":"
                    or (rest[:1] == b"=" and rest[1:2] != b"=")
                    or (before in b"'\"" and after == before)
                ):
                    return True
            position = data.find(word, end)
    return False


def _names_a_method(data: bytes) -> bool:
    """One of the method names right after a dot (`app.task`, also `app. task` or a line continuation)."""
    for match in _METHOD_NAMES.finditer(data):
        before = match.start() - 1
        while before >= 0 and data[before] in b" \t\\\r\n":
            before -= 1
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
