"""CRL301-CRL302, per file: every corral `Runtime(...)` declaration resolved into a budget fact.

The fact holds the runtime's queues' names and `max_workers` (queues declared inline, in this module or
imported from another project module), `relay`, `max_conns` and `reserve`, and every value the gate
could not resolve with where it stands. `corral.gates.rules.budget_report` turns the facts into findings.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.scoped import ScopedVisitor
from corral.gates.analysis.values import StaticValues, Unresolved
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.rules.base import Rule
from corral.gates.rules.budget_report import FACT, OVER_BUDGET, UNPROVEN
from corral.gates.source.prefilter import Source

RUNTIMES = frozenset({"corral.runtime.Runtime", "corral.runtime.runtime.Runtime"})
QUEUES = frozenset({"corral.runtime.Queue", "corral.runtime.declarations.Queue"})


class ConnectionBudget(Rule, ScopedVisitor):
    codes: ClassVar[dict[str, str]] = {
        OVER_BUDGET: "a runtime's workers plus its relay do not fit in its share of the database pool",
        UNPROVEN: "a value of the connection budget cannot be resolved statically",
    }
    # A runtime declared in infra drains the pool just the same.
    skips_infra = False

    VALID = (
        """
        from corral.runtime import Queue, Runtime
        index = Queue("index", max_workers=4, timeout=30)
        webhook = Queue("webhook", max_workers=8, timeout=15)
        runtime = Runtime(queues=[index, webhook], store="sqlite:///jobs.db", max_conns=40, relay=1)
        """,
        """
        import os
        from corral.runtime import Queue, Runtime
        WORKERS = int(os.environ.get("INDEX_WORKERS", "4"))
        runtime = Runtime(queues=[Queue("index", max_workers=WORKERS * 2)], store="sqlite://", max_conns=20)
        """,
    )
    INVALID = (
        """
        from corral.runtime import Queue, Runtime
        index = Queue("index", max_workers=4, timeout=30)
        notify = Queue("notify", max_workers=2, timeout=30)
        webhook = Queue("webhook", max_workers=10, timeout=15)
        maintenance = Queue("maintenance", max_workers=1, timeout=600)
        fetch = Queue("fetch", max_workers=3, timeout=60)
        queues = [index, notify, webhook, maintenance, fetch]
        runtime = Runtime(queues=queues, store="sqlite://", max_conns=40)  # error: 11 CRL301 "= 21 > 20"
        """,
        """
        import os
        from corral.runtime import Queue, Runtime
        index = Queue("index", max_workers=int(os.environ["WORKERS"]), timeout=30)  # error: 1 CRL302 "WORKERS"
        runtime = Runtime(queues=[index], store="sqlite://")
        """,
    )

    def __init__(self, context: FileContext) -> None:
        Rule.__init__(self, context)
        ScopedVisitor.__init__(self, context.names)
        self.values = StaticValues.of(context)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        # `Runtime` resolves to corral's only through an import naming corral (or inside corral itself).
        return (source.imports_any(b"corral") or source.package[:1] == ["corral"]) and source.has(b"Runtime")

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        return iter(())

    def visit_Call(self, node: ast.Call) -> None:
        if self.resolve(node.func) in RUNTIMES:
            self.context.add_fact(FACT, self._runtime_fact(node))
        self.generic_visit(node)

    def _runtime_fact(self, call: ast.Call) -> dict[str, Any]:
        unresolved: list[list[Any]] = []
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        fact: dict[str, Any] = {"line": call.lineno, "col": call.col_offset + 1, "unresolved": unresolved}
        if any(keyword.arg is None for keyword in call.keywords):
            unresolved.append(self._where(call, "Runtime(**...) hides its arguments from the gate"))
        for name in ("relay", "max_conns", "reserve"):
            node = keywords.get(name)
            fact[name] = None if node is None else self._number(node, self.values, self.scope, unresolved, name)
        fact["queues"] = self._queues(keywords.get("queues"), call, unresolved)
        return fact

    def _queues(self, node: ast.expr | None, call: ast.Call, unresolved: list[list[Any]]) -> list[list[Any]]:
        if node is None:
            unresolved.append(self._where(call, "Runtime(...) names no queues="))
            return []
        values, scope = self.values, self.scope
        if isinstance(node, (ast.Name, ast.Attribute)):
            located = values.definition(node, scope)
            if isinstance(located, Unresolved):
                unresolved.append(self._where(node, f"queues: {located.reason}", located.where))
                return []
            if not isinstance(located.node, ast.expr):
                unresolved.append(self._where(node, "queues= is not a list the gate can read"))
                return []
            node, values, scope = located.node, located.values, located.values.module.names.root
        if not isinstance(node, (ast.List, ast.Tuple)) or any(isinstance(item, ast.Starred) for item in node.elts):
            unresolved.append(self._where(node, "queues= is not a literal list of queues", values.where(node)))
            return []
        queues = []
        for item in node.elts:
            queue = self._queue(item, values, scope, unresolved)
            if queue is not None:
                queues.append(queue)
        return queues

    def _queue(self, item: ast.expr, values: StaticValues, scope: Any, unresolved: list[list[Any]]) -> list[Any] | None:
        if isinstance(item, (ast.Name, ast.Attribute)):
            located = values.definition(item, scope)
            if isinstance(located, Unresolved):
                unresolved.append(self._where(item, f"queue: {located.reason}", located.where))
                return None
            if not isinstance(located.node, ast.expr):
                unresolved.append(self._where(item, "not a Queue(...) declaration", values.where(item)))
                return None
            item, values, scope = located.node, located.values, located.values.module.names.root
        if not isinstance(item, ast.Call) or values.dotted(item.func, scope) not in QUEUES:
            unresolved.append(self._where(item, "not a Queue(...) declaration the gate can read", values.where(item)))
            return None
        name = values.string(item.args[0], scope) if item.args else values.unresolved(item, "a queue without a name")
        if isinstance(name, Unresolved):
            unresolved.append(self._where(item, f"queue name: {name.reason}", name.where))
            name = "?"
        workers_node = next((keyword.value for keyword in item.keywords if keyword.arg == "max_workers"), None)
        if workers_node is None:
            unresolved.append(self._where(item, f"queue {name} has no max_workers", values.where(item)))
            return None
        workers = self._number(workers_node, values, scope, unresolved, f"queue {name} max_workers")
        return None if workers is None else [name, workers]

    def _where(self, node: ast.AST, reason: str, where: str | None = None) -> list[Any]:
        """[path, line, reason]: where the unresolvable value stands (possibly in another module)."""
        if where is not None:
            path, _, line = where.rpartition(":")
            if path and line.isdigit():
                return [path, int(line), reason]
        return [self.context.relpath, getattr(node, "lineno", 1), reason]

    def _number(
        self, node: ast.expr, values: StaticValues, scope: Any, unresolved: list[list[Any]], what: str
    ) -> float | None:
        value = values.number(node, scope)
        if isinstance(value, Unresolved):
            unresolved.append([*self._where(node, f"{what}: {value.reason}", value.where), what])
            return None
        if value is None:
            unresolved.append([*self._where(node, f"{what} is None", values.where(node)), what])
            return None
        return value
