"""corral's own runtime as a CRL2 framework: `@queue.job("kind", timeout=...)` / `@queue.periodic(...)`, else
the `Queue(..., timeout=...)` the kind inherits, as `corral.runtime` itself decides. A zero, negative or
infinite timeout is no limit; `None` (or none given) on the job means the queue's.

A `Runtime`'s `enqueue(...)` / `publish(...)` stores the job (or the event) at once on the runtime's own store
connection (CRL402 inside a transaction), unless it is given `conn=`: then it is written in the caller's
transaction (the outbox) and exists only if that commits.

The gate may not import the runtime (only its budget arithmetic), so the runtime's names and keywords are
written here and tests/gates/test_runtime_api_pins.py pins each of them to `corral.runtime`.
"""

from __future__ import annotations

import ast

from corral.gates.analysis.values import Located
from corral.gates.frameworks.base import (
    DECORATOR,
    UNRESOLVED,
    UNSET,
    Decoration,
    Framework,
    Words,
    has_double_star,
    keyword,
    string_argument,
)
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

# Where `Queue` is defined and re-exported, the methods that declare a job kind on one, and the keyword both
# the queue and the job kind take their timeout by (a kind without its own inherits the queue's).
QUEUE_CLASSES = frozenset({"corral.runtime.Queue", "corral.runtime.declarations.Queue"})
JOB_METHODS = ("job", "periodic")
TIMEOUT = "timeout"
# Where `Runtime` is defined and re-exported, its methods that store a job or an event, and the keyword that
# writes it in the caller's transaction instead.
RUNTIME_CLASSES = frozenset({"corral.runtime.Runtime", "corral.runtime.runtime.Runtime"})
ENQUEUE_METHODS = ("enqueue", "publish")
IN_TRANSACTION = "conn"
# The limit's source when the kind inherits it.
QUEUE = "queue"


class Corral(Framework):
    name = "corral"
    code = "CRL201"
    summary = "a corral job kind without a positive timeout (from the job or its queue)"
    words = Words(packages=(b"corral",), declaring=(b"job", b"periodic"), methods=JOB_METHODS)
    no_limit_arguments = '("corral-prove.no-timeout", timeout=0)'
    fix_keyword = TIMEOUT
    enqueue_methods = frozenset(ENQUEUE_METHODS)

    VALID = (
        """
        from corral.runtime import Queue
        index = Queue("index", max_workers=4, timeout=30)
        @index.job("corpus.index")
        async def corpus_index(ctx, note_id): ...
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
        import os
        from corral.runtime import Queue
        index = Queue("index", max_workers=4, timeout=int(os.environ["INDEX_TIMEOUT"]))
        @index.job("corpus.index")  # error: 2 CRL204 "os.environ['INDEX_TIMEOUT']"
        async def corpus_index(ctx, note_id): ...
        """,
    )

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        assert isinstance(call.func, ast.Attribute)
        made = receivers.made(call.func.value)
        if made is None or made.maker not in RUNTIME_CLASSES:
            return None
        given = keyword(call, IN_TRANSACTION)
        if given is not None and not (isinstance(given.value, ast.Constant) and given.value.value is None):
            return None  # the outbox: written in the caller's transaction
        shown = receivers.shown(call.func)
        return JobEnqueue(shown, call, in_transaction=f"{shown}(..., {IN_TRANSACTION}=...)")

    def owns_method(self, made: str, attribute: str) -> bool:
        return made in QUEUE_CLASSES and attribute in JOB_METHODS

    def decorated(self, finder: Finder, site: Decoration) -> None:
        call, function, scope, queue = site.call, site.function, site.scope, site.owner
        if call is None or queue is None:
            return  # `@queue.job` without its call declares nothing
        assert isinstance(queue.node, ast.Call)
        queue_name = string_argument(queue.node, queue.values, None)
        kind_name = string_argument(call, finder.values, scope) or function.name
        if has_double_star(call) and keyword(call, TIMEOUT) is None:
            problem = f"job kind {kind_name!r}: timeout may come from **kwargs, which the gate cannot read"
            finder.fail(self, call, function, UNRESOLVED, problem, name=kind_name, queue=queue_name)
            return
        own = keyword(call, TIMEOUT)
        limit = finder.limit(own.value, scope, TIMEOUT) if own is not None else UNSET
        if limit.unresolved is not None:
            finder.fail(
                self, call, function, UNRESOLVED, f"timeout {limit.unresolved}", name=kind_name, queue=queue_name
            )
            return
        if limit.off is not None:
            problem = f"job kind {kind_name!r}: {limit.off}"
            finder.fail(self, call, function, self.code, problem, name=kind_name, queue=queue_name)
            return
        if limit.seconds is not None:
            finder.add(self, call, function, timeout=limit.seconds, source=DECORATOR, name=kind_name, queue=queue_name)
            return
        self._inherited(finder, site, call, queue, kind_name, queue_name)

    def _inherited(
        self, finder: Finder, site: Decoration, call: ast.Call, queue: Located, kind_name: str, queue_name: str | None
    ) -> None:
        """A kind without its own timeout runs under its queue's."""
        assert isinstance(queue.node, ast.Call)
        function = site.function
        inherited = keyword(queue.node, TIMEOUT)
        if inherited is None and has_double_star(queue.node):
            problem = f"queue {queue_name!r}: timeout may come from **kwargs, which the gate cannot read"
            finder.fail(self, call, function, UNRESOLVED, problem, name=kind_name, queue=queue_name)
            return
        limit = finder.limit(inherited.value, None, TIMEOUT, queue.values) if inherited is not None else UNSET
        if limit.unresolved is not None:
            problem = f"queue {queue_name!r} timeout {limit.unresolved}"
            finder.fail(self, call, function, UNRESOLVED, problem, name=kind_name, queue=queue_name)
        elif limit.seconds is not None:
            finder.add(self, call, function, timeout=limit.seconds, source=QUEUE, name=kind_name, queue=queue_name)
        else:
            why = limit.off or "has no timeout"
            queue_shown = f"queue {queue_name!r}" if queue_name else "its queue"
            problem = f"job kind {kind_name!r} has no timeout: {queue_shown} {why}; give the job timeout=..."
            finder.fail(self, call, function, self.code, problem, name=kind_name, queue=queue_name)


FRAMEWORK = Corral()
