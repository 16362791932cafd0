"""Huey as a CRL2 framework: `@huey.task()` and its periodic and db variants, on a Huey instance or from
`huey.contrib.djhuey`.

Huey has no hard timeout: the body must run inside `asyncio.timeout(N)` / `asyncio.wait_for(..., N)`.
Calling a task enqueues it, so CRL401 and CRL210 do not follow such a call into the body; CRL402 reports the
call inside a transaction, and a task's `schedule(...)` (which enqueues it with a delay).
"""

from __future__ import annotations

import ast

from corral.gates.frameworks.base import Decoration, Framework, Words
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

METHODS = ("task", "periodic_task", "db_task", "db_periodic_task")


class Huey(Framework):
    name = "huey"
    # "Calling a task-decorated function will enqueue the function call for execution by the consumer. A special
    # result handle is returned immediately" (Huey's README, https://pypi.org/project/huey/): the body runs in
    # a worker, not at the call.
    call_enqueues = True
    words = Words(packages=(b"huey",), declaring=(b"task",), methods=METHODS)
    decorators = frozenset(f"huey.contrib.djhuey.{method}" for method in METHODS)
    enqueue_methods = frozenset({"schedule"})

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        return receivers.task_method(call, self)

    def owns_method(self, made: str, attribute: str) -> bool:
        return made.split(".")[0] == "huey" and attribute in METHODS

    def decorated(self, finder: Finder, site: Decoration) -> None:
        finder.body_only(self, site)


FRAMEWORK = Huey()
