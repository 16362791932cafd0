"""Procrastinate as a CRL2 framework: `@app.task` on a `procrastinate.App`, or on the app of its Django
integration (`from procrastinate.contrib.django import app`).

Procrastinate has no hard timeout: the body must run inside `asyncio.timeout(N)` / `asyncio.wait_for(..., N)`.

A task's `defer()` / `defer_async()` (also after `configure(...)`) writes the job into Procrastinate's table at
once, through the app's connector (CRL402 inside a transaction). The Django integration's connector runs its
queries on Django's own database connection (procrastinate/contrib/django/django_connector.py), so inside a
Django `transaction.atomic()` the job row is part of that transaction and exists only if it commits: no finding
there (`JobEnqueue.through_django`). Any other connector (psycopg, aiopg) writes through a connection of its own,
which commits the job at once.
"""

from __future__ import annotations

import ast

from corral.gates.frameworks.base import Decoration, Framework, Words, keyword
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

APPS = frozenset({"procrastinate.App", "procrastinate.app.App"})
DJANGO_APP = "procrastinate.contrib.django.app"
DJANGO_CONNECTORS = frozenset(
    {"procrastinate.contrib.django.DjangoConnector", "procrastinate.contrib.django.django_connector.DjangoConnector"}
)
DEFERS = frozenset({"defer", "defer_async"})
CONFIGURE = "configure"


class Procrastinate(Framework):
    name = "procrastinate"
    words = Words(packages=(b"procrastinate",), declaring=(b"task",), methods=("task",))
    decorators = frozenset({f"{DJANGO_APP}.task"})
    enqueue_methods = DEFERS

    def owns_method(self, made: str, attribute: str) -> bool:
        return made in APPS and attribute == "task"

    def decorated(self, finder: Finder, site: Decoration) -> None:
        finder.body_only(self, site)

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        assert isinstance(call.func, ast.Attribute)
        task = receivers.value(call.func.value)
        if isinstance(task, ast.Call) and isinstance(task.func, ast.Attribute) and task.func.attr == CONFIGURE:
            task = task.func.value
        kinds, where = receivers.declaring(task, self)
        if not kinds:
            return None
        through_django = all(self._on_django_connector(kind.node, where) for kind in kinds)
        return JobEnqueue(receivers.shown(call.func), call, through_django=through_django)

    def _on_django_connector(self, decorator: ast.expr, receivers: Receivers) -> bool:
        """Whether the app of a task's decorator writes through Django's connection: the Django integration's app,
        or an `App(connector=DjangoConnector(...))`."""
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if not isinstance(target, ast.Attribute):
            return False
        if receivers.dotted(target) == f"{DJANGO_APP}.task":
            return True
        made = receivers.made(target.value)
        if made is None or not isinstance(made.owner.node, ast.Call):
            return False
        connector = keyword(made.owner.node, "connector")
        return (
            connector is not None
            and isinstance(connector.value, ast.Call)
            and made.owner.values.dotted(connector.value.func) in DJANGO_CONNECTORS
        )


FRAMEWORK = Procrastinate()
