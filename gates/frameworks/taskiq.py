"""taskiq as a CRL2 framework: `@broker.task(timeout=...)` on a broker any taskiq package made.

taskiq has no default time limit, and it can interrupt only an `async def` task, so a kind passes only
with a positive `timeout=` on a coroutine function (none, `None`, zero or negative is no limit).
"""

from __future__ import annotations

import ast

from corral.gates.frameworks.base import (
    DECORATOR,
    UNRESOLVED,
    UNSET,
    Decoration,
    Framework,
    Words,
    keyword,
    string_argument,
)
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

# A task's `kiq(...)` sends it to the broker at once (CRL402), also through its kicker: `task.kicker()` and the
# `with_*` calls chained on it (taskiq/kicker.py) configure the message, `kiq` sends it.
KIQ, KICKER = "kiq", "kicker"


class Taskiq(Framework):
    name = "taskiq"
    words = Words(packages=(b"taskiq",), declaring=(b"task",), methods=("task",))
    enqueue_methods = frozenset({KIQ})

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        assert isinstance(call.func, ast.Attribute)
        receiver = receivers.value(call.func.value)
        while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
            configured = receiver.func
            receiver = receivers.value(configured.value)
            if configured.attr == KICKER:
                break
            if not configured.attr.startswith("with_"):
                return None
        return JobEnqueue(receivers.shown(call.func), call) if receivers.declares(receiver, self) else None

    def owns_method(self, made: str, attribute: str) -> bool:
        # Brokers come from taskiq itself and from its plugin packages (taskiq_redis, taskiq_aio_pika...), and
        # a broker's `with_result_backend(...)`, `with_middlewares(...)`... configure it and return it
        # (taskiq/abc/broker.py: each `with_*` ends in `return self`), so a chain of them is still the broker.
        constructor, *chained = made.split("().")
        return (
            constructor.split(".")[0].startswith("taskiq")
            and all(method.startswith("with_") for method in chained)
            and attribute == "task"
        )

    def decorated(self, finder: Finder, site: Decoration) -> None:
        decorator, call, function, scope = site.node, site.call, site.function, site.scope
        own = keyword(call, "timeout") if call is not None else None
        name = (string_argument(call, finder.values, scope) if call is not None else None) or function.name
        limit = finder.limit(own.value, scope, "timeout") if own is not None else UNSET
        if limit.unresolved is not None:
            finder.fail(self, decorator, function, UNRESOLVED, f"timeout {limit.unresolved}", name=name)
        elif limit.seconds is None:
            why = limit.off or "taskiq has no default time limit"
            finder.fail(self, decorator, function, self.code, f"task {name}: {why}; give it timeout=...", name=name)
        elif not isinstance(function, ast.AsyncFunctionDef):
            problem = f"task {name}: taskiq cannot interrupt a sync task, so timeout= is no hard limit; make it async"
            finder.fail(self, decorator, function, self.code, problem, name=name)
        else:
            finder.add(self, decorator, function, timeout=limit.seconds, source=DECORATOR, queue=None, name=name)


FRAMEWORK = Taskiq()
