"""CRL301-CRL302: the connection budget of every corral `Runtime(...)`, in two halves.

Per file, `ConnectionBudget` resolves each `Runtime(...)` declaration into a `BudgetFact`: the runtime's
queues' names and `max_workers` (queues declared inline, in this module or imported from another project
module), `relay`, `max_conns` and `reserve`, and every value the gate could not resolve with where it
stands. Once every file is checked, `ConnectionBudgetCheck` reads the facts, applies the deployment
settings `max_conns`, `processes` and `reserve` from `[tool.corral]`, and checks each runtime with the
arithmetic of the runtime's own boot check (`corral.runtime.budget.compute_budget`: one function, two
callers). Being a whole-project check, the gate reports it and the per-file flake8 front does not. A
value the gate could not resolve is CRL302 where it stands: a budget that cannot be proven does not pass.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.scoped import ScopedVisitor
from corral.gates.analysis.values import StaticValues, Unresolved
from corral.gates.config import Config
from corral.gates.findings import FactsByFile, Finding
from corral.gates.frameworks.corral import QUEUE_CLASSES
from corral.gates.rules.base import ProjectCheck, Rule, json_fields, record_fact, recorded
from corral.gates.source.prefilter import Source

RUNTIMES = frozenset({"corral.runtime.Runtime", "corral.runtime.runtime.Runtime"})
QUEUES = QUEUE_CLASSES
# What `Runtime.__init__` assumes when an argument is left out.
RUNTIME_DEFAULTS: dict[str, float] = {"relay": 1, "max_conns": 40}


class UnresolvedValue(NamedTuple):
    """A value of a runtime's budget the gate could not resolve, where it stands (possibly in another
    module). `setting` is the value's name (`relay`, `queue index max_workers`...), None for a problem
    with the declaration itself (no `queues=`, a `**` argument)."""

    path: str
    line: int
    reason: str
    setting: str | None = None


class QueueWorkers(NamedTuple):
    """One queue of a runtime: its name (`?` when the gate cannot read it) and its `max_workers`."""

    name: str
    workers: float


class BudgetFact(NamedTuple):
    """One `Runtime(...)` declaration as far as the gate could resolve it (None: the argument is left out
    or could not be resolved; `unresolved` says which)."""

    line: int
    col: int
    relay: float | None
    max_conns: float | None
    reserve: float | None
    queues: tuple[QueueWorkers, ...]
    unresolved: tuple[UnresolvedValue, ...]

    @classmethod
    def fact_kind(cls) -> str:
        """What this record's facts are filed under in a file's facts and in the cache."""
        return "budget"

    @classmethod
    def from_json(cls, data: Any) -> BudgetFact:
        data = json_fields(cls, data)
        queues = tuple(QueueWorkers(**queue) for queue in data["queues"])
        unresolved = tuple(UnresolvedValue(**value) for value in data["unresolved"])
        return cls(**{**data, "queues": queues, "unresolved": unresolved})


class ConnectionBudget(Rule, ScopedVisitor):
    """The per-file half: every corral `Runtime(...)` declaration recorded as a `BudgetFact` (it reports
    nothing itself; `ConnectionBudgetCheck` reports under these codes)."""

    OVER_BUDGET: ClassVar[str] = "CRL301"
    UNPROVEN: ClassVar[str] = "CRL302"
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
            record_fact(self._runtime_fact(node), self.context)
        self.generic_visit(node)

    def _runtime_fact(self, call: ast.Call) -> BudgetFact:
        unresolved: list[UnresolvedValue] = []
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        if any(keyword.arg is None for keyword in call.keywords):
            unresolved.append(self._where(call, "Runtime(**...) hides its arguments from the gate"))
        settings: dict[str, float | None] = {}
        for name in ("relay", "max_conns", "reserve"):
            node = keywords.get(name)
            settings[name] = None if node is None else self._number(node, self.values, self.scope, unresolved, name)
        queues = self._queues(keywords.get("queues"), call, unresolved)
        return BudgetFact(
            line=call.lineno,
            col=call.col_offset + 1,
            relay=settings["relay"],
            max_conns=settings["max_conns"],
            reserve=settings["reserve"],
            queues=tuple(queues),
            unresolved=tuple(unresolved),
        )

    def _queues(self, node: ast.expr | None, call: ast.Call, unresolved: list[UnresolvedValue]) -> list[QueueWorkers]:
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

    def _queue(
        self, item: ast.expr, values: StaticValues, scope: Any, unresolved: list[UnresolvedValue]
    ) -> QueueWorkers | None:
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
        return None if workers is None else QueueWorkers(name, workers)

    def _where(
        self, node: ast.AST, reason: str, where: str | None = None, setting: str | None = None
    ) -> UnresolvedValue:
        """Where the unresolvable value stands: `where` (`path:line`, possibly in another module), else `node`."""
        if where is not None:
            path, _, line = where.rpartition(":")
            if path and line.isdigit():
                return UnresolvedValue(path, int(line), reason, setting)
        return UnresolvedValue(self.context.relpath, getattr(node, "lineno", 1), reason, setting)

    def _number(
        self, node: ast.expr, values: StaticValues, scope: Any, unresolved: list[UnresolvedValue], what: str
    ) -> float | None:
        value = values.number(node, scope)
        if isinstance(value, Unresolved):
            unresolved.append(self._where(node, f"{what}: {value.reason}", value.where, setting=what))
            return None
        if value is None:
            unresolved.append(self._where(node, f"{what} is None", values.where(node), setting=what))
            return None
        return value


class ConnectionBudgetCheck(ProjectCheck):
    """The whole-project half: CRL301/CRL302 for every runtime declared in the project, and the `budget`
    report section (one entry per runtime, what `corral check --budget` prints)."""

    rule = ConnectionBudget
    fact = BudgetFact
    REPORT: ClassVar[str] = "budget"

    def run(self, facts_by_file: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
        findings: list[Finding] = []
        entries: list[dict[str, Any]] = []
        reports[self.REPORT] = entries
        declared = list(recorded(BudgetFact, facts_by_file))
        if not declared:
            return findings
        # Imported only for a project that declares a runtime: the package brings asyncio with it.
        from corral.runtime.budget import compute_budget

        for relpath, fact in sorted(declared, key=lambda item: (item[0], item[1].line)):
            where = f"{relpath}:{fact.line}"
            # A deployment's [tool.corral] max_conns stands in for a pool size the code reads at run time.
            problems = [
                (value.path, value.line, value.reason)
                for value in fact.unresolved
                if not (config.max_conns and value.setting == "max_conns")
            ]
            queues = [(queue.name, queue.workers) for queue in fact.queues]
            relay = RUNTIME_DEFAULTS["relay"] if fact.relay is None else fact.relay
            max_conns = config.max_conns or (
                RUNTIME_DEFAULTS["max_conns"] if fact.max_conns is None else fact.max_conns
            )
            reserve = config.reserve if fact.reserve is None else fact.reserve
            for label, value in (*queues, ("relay", relay), ("max_conns", max_conns)):
                minimum = 0 if label == "relay" else 1
                if value != int(value) or value < minimum:
                    problems.append((relpath, fact.line, f"{label} must be a whole number >= {minimum}, got {value:g}"))
            if not 0 < reserve <= 1:
                problems.append((relpath, fact.line, f"reserve must be in (0, 1], got {reserve:g}"))
            unproven = ConnectionBudget.UNPROVEN
            for path, line, reason in problems:
                message = f"{reason}; the connection budget of the runtime at {where} cannot be proven"
                findings.append(Finding(path, line, 1, unproven, f"{message}: use literals or module-level constants"))
            entry: dict[str, Any] = {"path": relpath, "line": fact.line, "ok": None, "problems": len(problems)}
            if not problems:
                budget = compute_budget(
                    [(name, int(workers)) for name, workers in queues],
                    relay=int(relay),
                    max_conns=int(max_conns),
                    reserve=reserve,
                    processes=config.processes,
                )
                entry.update(
                    queues=[{"name": name, "workers": workers} for name, workers in budget.queues],
                    relay=budget.relay,
                    processes=budget.processes,
                    max_conns=budget.max_conns,
                    reserve=budget.reserve,
                    total=budget.total,
                    limit=budget.limit,
                    ok=budget.ok,
                    arithmetic=budget.describe(),
                )
                if not budget.ok:
                    message = (
                        f"workers could drain the database pool: {budget.describe()}; "
                        "lower max_workers or raise max_conns"
                    )
                    findings.append(Finding(relpath, fact.line, fact.col, ConnectionBudget.OVER_BUDGET, message))
            entries.append(entry)
        return findings


def render_budget(entries: list[dict[str, Any]]) -> str:
    """The text table `corral check --budget` prints (and prints by itself when a budget fails)."""
    if not entries:
        return "No corral Runtime(...) declared: no connection budget to check.\n"
    lines = []
    for entry in entries:
        where = f"{entry['path']}:{entry['line']}"
        if entry["ok"] is None:
            unproven = ConnectionBudget.UNPROVEN
            lines.append(
                f"budget of {where}: cannot be proven ({entry['problems']} unresolved value(s), see {unproven})"
            )
            continue
        lines.append(f"budget of {where}: {'ok' if entry['ok'] else 'OVER'}")
        for queue in entry["queues"]:
            lines.append(f"  {queue['name']:<24} {queue['workers']:>5}")
        lines.append(f"  {'relay':<24} {entry['relay']:>5}")
        lines.append(f"  {entry['arithmetic']}")
    return "\n".join(lines) + "\n"
