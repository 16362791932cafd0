"""arq as a CRL2 framework: `func(coroutine, timeout=...)` / `cron(...)`, and the `WorkerSettings` class.

A settings class (`functions = [...]`, `cron_jobs = [...]`, `job_timeout = ...`, plain or annotated, as
`job_timeout: int | None = None`) in a module that imports arq declares its functions; `job_timeout` applies
to those without their own `timeout=` (arq/worker.py, `run_job`: `timeout_s = self.job_timeout_s if
function.timeout_s is None else function.timeout_s`). The job then runs under `asyncio.wait_for(job,
timeout_s)`: `None` is no limit, and zero or negative times the job out at once (a bug, reported as such).
arq's documented default (300 s) counts otherwise; strict mode demands an explicit timeout.
"""

from __future__ import annotations

import ast

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Unresolved
from corral.gates.frameworks.base import (
    DECORATOR,
    UNRESOLVED,
    UNSET,
    Framework,
    Limit,
    Words,
    keyword,
    shown,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

FUNCTIONS = frozenset({"arq.func", "arq.worker.func", "arq.cron", "arq.cron.cron"})
# A pool's `enqueue_job` writes the job to Redis at once (CRL402); pools come from `create_pool` (awaited).
POOLS = frozenset({"arq.create_pool", "arq.connections.create_pool", "arq.ArqRedis", "arq.connections.ArqRedis"})
ENQUEUE_JOB = "enqueue_job"
# The limit's source when it is the settings class's job_timeout.
WORKER = "worker settings"


class Arq(Framework):
    name = "arq"
    words = Words(packages=(b"arq",), always_read=True)
    default_limit = 300.0
    calls = FUNCTIONS
    enqueue_methods = frozenset({ENQUEUE_JOB})

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        assert isinstance(call.func, ast.Attribute)
        made = receivers.made(call.func.value)
        return JobEnqueue(receivers.shown(call.func), call) if made is not None and made.maker in POOLS else None

    def called(self, finder: Finder, call: ast.Call, scope: Scope) -> None:
        self._function(finder, call, call, scope, None)

    def class_body(self, finder: Finder, cls: ast.ClassDef, scope: Scope) -> None:
        """`class WorkerSettings: functions = [...]; job_timeout = ...` in a module that imports arq."""
        lists: list[ast.expr] = []
        fallback: Limit | None = None
        for statement in cls.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                target, value = statement.target, statement.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id in ("functions", "cron_jobs"):
                lists.append(value)
            elif isinstance(target, ast.Name) and target.id == "job_timeout":
                fallback = _limit(finder, value, scope, "job_timeout")
                if fallback == UNSET:
                    fallback = Limit(off="job_timeout=None is no limit")
        if not lists or not finder.imports("arq"):
            return
        for functions in lists:
            if not isinstance(functions, (ast.List, ast.Tuple)):
                finder.fail(self, functions, None, UNRESOLVED, f"{cls.name}: the job list is not a literal list")
                continue
            for element in functions.elts:
                if isinstance(element, ast.Call) and finder.values.dotted(element.func, scope) in FUNCTIONS:
                    self._function(finder, element, element, scope, fallback)
                else:
                    self._function(finder, None, element, scope, fallback)

    def _function(
        self, finder: Finder, call: ast.Call | None, node: ast.expr, scope: Scope, fallback: Limit | None
    ) -> None:
        if call is not None:
            finder.seen_calls.add(id(call))
        target = call.args[0] if call is not None and call.args else node
        function = finder.function(target, scope)
        name = string_keyword(call, "name", finder.values, scope) if call is not None else None
        name = name or (function.name if function else None)
        found = None
        if call is not None:
            own = keyword(call, "timeout")
            if own is not None:
                found = _limit(finder, own.value, scope, "timeout")
                found = None if found == UNSET else found
        source = DECORATOR
        if found is None and fallback is not None:
            found, source = fallback, WORKER
        if found is not None and found.seconds is not None:
            if found.seconds <= 0:
                label = "timeout" if source == DECORATOR else "job_timeout"
                problem = (
                    f"arq: {label}={shown(found.seconds)} times every job out at once (arq runs it under "
                    f"asyncio.wait_for(job, {label})); give it a positive {label}"
                )
                finder.fail(self, node, function, self.code, problem, name=name)
            else:
                finder.add(self, node, function, timeout=found.seconds, source=source, name=name, queue=None)
            return
        finder.default_or_explicit(self, node, function, found, label="timeout", name=name)


def _limit(finder: Finder, expression: ast.expr, scope: Scope, label: str) -> Limit:
    """A timeout in seconds (zero or negative kept, for `_function`), `UNSET` for None, or unresolvable."""
    value = finder.values.number(expression, scope)
    if isinstance(value, Unresolved):
        return Limit(unresolved=value)
    return UNSET if value is None else Limit(seconds=value)


FRAMEWORK = Arq()
