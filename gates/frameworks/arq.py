"""arq as a CRL2 framework: `func(coroutine, timeout=...)` / `cron(...)`, and the `WorkerSettings` class.

A settings class (`functions = [...]`, `cron_jobs = [...]`, `job_timeout = ...`) in a module that imports
arq declares its functions; `job_timeout` applies to those without their own `timeout=`. arq's documented
default (300 s) counts unless the limit is turned off (`job_timeout=None`, zero or negative); strict mode
demands an explicit timeout.
"""

from __future__ import annotations

import ast

from corral.gates.analysis.names import Scope
from corral.gates.frameworks.base import UNRESOLVED, UNSET, Framework, Limit, Words, keyword, string_keyword
from corral.gates.frameworks.walk import Finder

FUNCTIONS = frozenset({"arq.func", "arq.worker.func", "arq.cron", "arq.cron.cron"})
# The limit's source when it is the settings class's job_timeout.
WORKER = "worker settings"


class Arq(Framework):
    name = "arq"
    words = Words(packages=(b"arq",), always_read=True)
    default_limit = 300.0
    calls = FUNCTIONS

    def called(self, finder: Finder, call: ast.Call, scope: Scope) -> None:
        self._function(finder, call, call, scope, None)

    def class_body(self, finder: Finder, cls: ast.ClassDef, scope: Scope) -> None:
        """`class WorkerSettings: functions = [...]; job_timeout = ...` in a module that imports arq."""
        lists: list[ast.expr] = []
        fallback: Limit | None = None
        for statement in cls.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name) and target.id in ("functions", "cron_jobs"):
                    lists.append(statement.value)
                elif isinstance(target, ast.Name) and target.id == "job_timeout":
                    fallback = finder.limit(statement.value, scope, "job_timeout")
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
        found = None
        if call is not None:
            own = keyword(call, "timeout")
            if own is not None:
                found = finder.limit(own.value, scope, "timeout")
                found = None if found == UNSET else found
        if found is None and fallback is not None:
            if fallback.seconds is None:
                found = fallback
            else:
                finder.add(self, node, function, timeout=fallback.seconds, source=WORKER, queue=None)
                return
        name = string_keyword(call, "name", finder.values, scope) if call is not None else None
        finder.default_or_explicit(
            self, node, function, found, label="timeout", name=name or (function.name if function else None)
        )


FRAMEWORK = Arq()
