"""CRL301-CRL302: the connection budget of every corral `Runtime(...)`, in two halves.

Per file, `ConnectionBudget` resolves each `Runtime(...)` declaration into a `BudgetFact`: the runtime's
queues' names and `max_workers` (queues declared inline, in this module or imported from another project
module), `relay`, `max_conns` and `reserve`, and every value the gate could not resolve with where it
stands. Once every file is checked, `ConnectionBudgetCheck` reads the facts, applies the deployment
settings `max_conns`, `processes` and `reserve` from `[tool.corral]`, and checks each runtime with the
arithmetic of the runtime's own boot check (`corral.runtime.budget.compute_budget`: one function, two
callers). Being a whole-project check, the gate reports it and the per-file flake8 front does not. A
value the gate could not resolve is CRL302 where it stands: a budget that cannot be proven does not pass.

The processes of a runtime, unless `[tool.corral] processes` sets them (it then wins), are counted from
the deployment files (`corral.gates.source.deployments`, read as data and never executed): the sum over
every compose service and Kubernetes container whose command runs `corral worker` on it (its
`deploy.replicas` or `scale`, its Deployment's `spec.replicas`; one when none is stated), else, when no
such command runs it, gunicorn's `workers` from `gunicorn.conf.py` (the runtime then runs in the web
server's processes), else 1. With several runtimes in the project a command counts for the one declared
in the module its `MODULE:RUNTIME` names. A count those files do not spell as a number (`${REPLICAS}`,
`deploy.mode: global`, a DaemonSet, a YAML error, a computed `workers`) is CRL302 at its file and line.
The budget table says where every factor came from.
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
from corral.gates.source.deployments import Deployments, UnreadableCount, read_deployments
from corral.gates.source.discovery import module_name_for
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

        # The deployment files are read only when [tool.corral] leaves the count of processes to them.
        deployments = read_deployments(config.root, config.kubernetes_manifests) if config.processes is None else None
        runtime_modules = {relpath: module_name_for(relpath)[0] for relpath, _ in declared}
        for relpath, fact in sorted(declared, key=lambda item: (item[0], item[1].line)):
            where = f"{relpath}:{fact.line}"
            processes = runtime_processes(relpath, runtime_modules, deployments, config)
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
            if config.max_conns:
                max_conns_from = "[tool.corral] max_conns"
            else:
                max_conns_from = where if fact.max_conns is not None else "the Runtime's default"
            reserve_from = where if fact.reserve is not None else "[tool.corral] reserve (default 0.5)"
            sources = {
                "processes": processes.origin,
                "max_conns": f"max_conns {max_conns:g} from {max_conns_from}",
                "reserve": f"reserve {reserve:g} from {reserve_from}",
            }
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
            for path, line, reason in processes.problems:
                message = f"{reason}; the processes of the runtime at {where} cannot be counted, so its budget"
                hint = "state the count as a number, or set processes in [tool.corral]"
                findings.append(Finding(path, line, 1, unproven, f"{message} cannot be proven: {hint}"))
            problem_count = len(problems) + len(processes.problems)
            entry: dict[str, Any] = {"path": relpath, "line": fact.line, "ok": None, "problems": problem_count}
            if not problem_count:
                assert processes.total is not None
                budget = compute_budget(
                    [(name, int(workers)) for name, workers in queues],
                    relay=int(relay),
                    max_conns=int(max_conns),
                    reserve=reserve,
                    processes=processes.total,
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
                    sources=sources,
                )
                if not budget.ok:
                    message = (
                        f"workers could drain the database pool: {budget.describe()}; "
                        f"lower max_workers or raise max_conns ({processes.origin})"
                    )
                    findings.append(Finding(relpath, fact.line, fact.col, ConnectionBudget.OVER_BUDGET, message))
            entries.append(entry)
        return findings


class Processes(NamedTuple):
    """How many processes run one runtime, where that count comes from (`processes 3 from compose.yml:13
    (service worker, deploy.replicas)`), and why it cannot be counted (None then)."""

    total: int | None
    origin: str
    problems: tuple[tuple[str, int, str], ...] = ()


def runtime_processes(
    relpath: str, runtime_modules: dict[str, str], deployments: Deployments | None, config: Config
) -> Processes:
    """The processes of the runtime declared in `relpath`: `[tool.corral] processes` when set; else the sum
    over every compose service and Kubernetes container running `corral worker` on it; else gunicorn's
    `workers` (no worker command runs it, so it runs in the web server's processes); else 1."""
    if config.processes is not None:
        origin = f"processes {config.processes} from [tool.corral] processes (set: wins over the deployment files)"
        return Processes(config.processes, origin)
    assert deployments is not None  # read whenever the config leaves the count to them
    module = runtime_modules[relpath]

    def runs_it(target: str | None) -> bool:
        # With one runtime in the project, every worker command runs it; else the command must name its module.
        named = (target or "").partition(":")[0]
        return len(runtime_modules) == 1 or target is None or named == module or module.endswith(f".{named}")

    problems = [(value.path, value.line, value.reason) for value in deployments.unreadable if runs_it(value.target)]
    others = set(runtime_modules.values())
    for worker in deployments.workers:
        named = (worker.target or "").partition(":")[0]
        if len(others) > 1 and not any(name == named or name.endswith(f".{named}") for name in others):
            shown = f"corral worker {worker.target}" if worker.target else "corral worker without MODULE:RUNTIME"
            reason = f"{worker.origin} runs {shown}, which names none of the modules declaring the project's runtimes"
            problems.append((worker.path, worker.line, reason))
    mine = [worker for worker in deployments.workers if runs_it(worker.target)]
    if problems:
        return Processes(None, "processes cannot be counted", tuple(problems))
    if mine:
        terms = [f"{worker.processes} from {worker.path}:{worker.line} ({worker.origin})" for worker in mine]
        total = sum(worker.processes for worker in mine)
        return Processes(total, f"processes {terms[0] if len(terms) == 1 else f'{total} = ' + ' + '.join(terms)}")
    web = deployments.web
    if isinstance(web, UnreadableCount):
        return Processes(None, "processes cannot be counted", ((web.path, web.line, web.reason),))
    if web is not None:
        origin = f"{web.path}:{web.line} (gunicorn workers; no deployment file runs corral worker on this runtime)"
        return Processes(web.workers, f"processes {web.workers} from {origin}")
    return Processes(1, "processes 1 (no deployment file declares how many run this runtime)")


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
        lines.extend(f"  {source}" for source in entry["sources"].values())
        lines.append(f"  {entry['arithmetic']}")
    return "\n".join(lines) + "\n"
