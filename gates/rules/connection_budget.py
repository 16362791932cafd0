"""CRL301-CRL302: the connection budget of every corral `Runtime(...)`, in two halves.

Per file, `ConnectionBudget` resolves each `Runtime(...)` declaration into a `BudgetFact`: the runtime's
queues' names and `max_workers` (queues declared inline, in this module or imported from another project
module), `relay`, `max_conns` and `reserve`, and every value the gate could not resolve with where it
stands. Once every file is checked, `ConnectionBudgetCheck` reads the facts, applies the deployment
settings `max-conns`, `processes` and `reserve` from `[tool.corral]`, and checks each runtime with the
arithmetic of the runtime's own boot check (`corral.runtime.budget.compute_budget`: one function, two
callers). Being a whole-project check, the gate reports it and the per-file flake8 front does not. A
value the gate could not resolve is CRL302 where it stands: a budget that cannot be proven does not pass.

The processes of a runtime, unless `[tool.corral] processes` sets them (it then wins), are counted from the
deployment files (`corral.gates.source.deployments`, read as data and never executed): the sum over every
compose service and Kubernetes container whose command runs `corral worker` on it (its `deploy.replicas` or
`scale`, its Deployment's `spec.replicas` or autoscaler's `maxReplicas`; one when none is stated), else, when
no such command runs it, gunicorn's `workers` from `gunicorn.conf.py` (the runtime then runs in the web
server's processes), else 1. With several runtimes in the project a command counts for the one declared in the
module its `MODULE:RUNTIME` names. A count those files do not spell as a number (`${REPLICAS}`, `deploy.mode:
global`, a DaemonSet, a YAML error, a computed `workers`) is CRL302 at its file and line. The budget table
says where every factor came from.

Celery workers are checked against the database too (`CeleryBudgetCheck`): the per-file half records
module-level Celery concurrency settings and Django's `CONN_MAX_AGE` as `DatabaseSetting`s, and the project
half multiplies each `celery worker`'s concurrency by its processes when Django keeps the connections.
SQLAlchemy engines declared at a module's top level are recorded as `EnginePool`s, and `EngineBudgetCheck` sums
their pools (`pool_size + max_overflow`) times the processes against the same share of the database.
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
from corral.gates.frameworks import celery
from corral.gates.frameworks.corral import QUEUE_CLASSES
from corral.gates.rules.base import ProjectCheck, Rule, json_fields, record_fact, recorded
from corral.gates.source.deployments import Deployments, UnreadableCount, WorkerCommand, read_deployments
from corral.gates.source.discovery import module_name_for
from corral.gates.source.prefilter import Source

RUNTIMES = frozenset({"corral.runtime.Runtime", "corral.runtime.runtime.Runtime"})
QUEUES = QUEUE_CLASSES
# The words of the settings the Celery half reads: Django's CONN_MAX_AGE (also dj-database-url's keyword)
# and Celery's concurrency.
SETTING_WORDS = (b"CONN_MAX_AGE", b"conn_max_age", celery.CONCURRENCY.encode(), celery.DJANGO_CONCURRENCY.encode())
# What `Runtime.__init__` assumes when an argument is left out.
RUNTIME_DEFAULTS: dict[str, float] = {"relay": 1, "max_conns": 40}
# SQLAlchemy's engine factories, and the words that find them.
ASYNC_ENGINE_FACTORY = "sqlalchemy.ext.asyncio.create_async_engine"
ENGINE_FACTORIES = frozenset({"sqlalchemy.create_engine", "sqlalchemy.engine.create_engine", ASYNC_ENGINE_FACTORY})
ENGINE_WORDS = (b"create_engine", b"create_async_engine")
# `create_engine`'s documented pool defaults (QueuePool; AsyncAdaptedQueuePool for the async engine).
ENGINE_DEFAULTS: dict[str, int] = {"pool_size": 5, "max_overflow": 10}
# The most connections a process keeps through each of SQLAlchemy's pools: the queue pools `pool_size +
# max_overflow`, SingletonThreadPool one per thread up to `pool_size`, StaticPool and AssertionPool one.
# NullPool keeps none (a connection per checkout, closed on return): like Django's CONN_MAX_AGE 0, not counted.
QUEUE_POOLS = frozenset({"QueuePool", "AsyncAdaptedQueuePool", "FallbackAsyncAdaptedQueuePool"})
ONE_CONNECTION_POOLS = frozenset({"StaticPool", "AssertionPool"})
UNCOUNTED_POOLS = frozenset({"NullPool"})


def _is_conf(node: ast.expr) -> bool:
    """`<app>.conf`: a Celery app's configuration."""
    return isinstance(node, ast.Attribute) and node.attr == "conf"


def _names_concurrency(target: ast.expr, celery_config: bool) -> bool:
    """`CELERY_WORKER_CONCURRENCY` (Django settings), `<app>.conf.worker_concurrency`, or `worker_concurrency`
    in a `celeryconfig` module."""
    if isinstance(target, ast.Attribute):
        return target.attr == celery.CONCURRENCY and _is_conf(target.value)
    if isinstance(target, ast.Name):
        return target.id == celery.DJANGO_CONCURRENCY or (celery_config and target.id == celery.CONCURRENCY)
    return False


def _entry(mapping: ast.Dict, key: str) -> ast.expr | None:
    """The value of a string key in a dict display."""
    for item_key, value in zip(mapping.keys, mapping.values, strict=True):
        if isinstance(item_key, ast.Constant) and item_key.value == key:
            return value
    return None


def _subscripts(node: ast.expr) -> list[str]:
    """`DATABASES["default"]["CONN_MAX_AGE"]` -> `["DATABASES", "default", "CONN_MAX_AGE"]` (else empty)."""
    keys: list[str] = []
    while isinstance(node, ast.Subscript):
        if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            return []
        keys.insert(0, node.slice.value)
        node = node.value
    return [node.id, *keys] if isinstance(node, ast.Name) and keys else []


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


class DatabaseSetting(NamedTuple):
    """A module-level setting the Celery half of the budget reads: Celery's worker concurrency (`setting`
    is `worker_concurrency`) or Django's `DATABASES["default"]` `CONN_MAX_AGE`. `value` is its number;
    None for the literal None (for `CONN_MAX_AGE`: connections kept for ever) or when `unresolved` says
    why the gate could not read it."""

    line: int
    col: int
    setting: str
    value: float | None
    unresolved: str | None

    @classmethod
    def fact_kind(cls) -> str:
        """What this record's facts are filed under in a file's facts and in the cache."""
        return "database_setting"

    @classmethod
    def from_json(cls, data: Any) -> DatabaseSetting:
        return cls(**json_fields(cls, data))


class EnginePool(NamedTuple):
    """A SQLAlchemy engine declared at a module's top level: the most connections its pool keeps in each
    process (`connections`; None when its pool keeps none, e.g. NullPool or SQLite, or when `unresolved`
    says why the gate could not read it), the pool class, and where the count comes from (`origin`)."""

    line: int
    col: int
    pool: str
    connections: int | None
    origin: str
    unresolved: str | None

    @classmethod
    def fact_kind(cls) -> str:
        """What this record's facts are filed under in a file's facts and in the cache."""
        return "engine_pool"

    @classmethod
    def from_json(cls, data: Any) -> EnginePool:
        return cls(**json_fields(cls, data))


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
        """
        # corral-config: max-conns = 40
        DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "CONN_MAX_AGE": 600}}
        CELERY_WORKER_CONCURRENCY = 8
        """,
    )
    INVALID = (
        """
        # corral-config: max-conns = 20
        DATABASES = {"default": {"CONN_MAX_AGE": None}}  # error: 42 CRL301 "concurrency 16 x processes 1 = 16 > 10"
        CELERY_WORKER_CONCURRENCY = 16
        """,
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
        """
        # corral-config: max-conns = 40
        from sqlalchemy import create_engine
        engine = create_engine("postgresql://db/app", pool_size=10, max_overflow=20)  # error: 10 CRL301 "30 > 20"
        """,
    )

    def __init__(self, context: FileContext) -> None:
        Rule.__init__(self, context)
        ScopedVisitor.__init__(self, context.names)
        self.values = StaticValues.of(context)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        if source.has(*SETTING_WORDS, *ENGINE_WORDS):
            return True
        # `Runtime` resolves to corral's only through an import naming corral (or inside corral itself).
        return (source.imports_any(b"corral") or source.package[:1] == ["corral"]) and source.has(b"Runtime")

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        for statement in self.context.tree.body:
            self._database_settings(statement)
        return iter(())

    def _database_settings(self, statement: ast.stmt) -> None:
        """Record the module-level Celery concurrency and Django `CONN_MAX_AGE` settings of `statement`, and
        the SQLAlchemy engines it builds."""
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)) and statement.value is not None:
            for call in self._engine_calls(statement.value):
                record_fact(self._engine_pool(call), self.context)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value  # app.conf.update(worker_concurrency=8)
            if isinstance(call.func, ast.Attribute) and call.func.attr == "update" and _is_conf(call.func.value):
                for keyword in call.keywords:
                    if keyword.arg == celery.CONCURRENCY:
                        self._setting(celery.CONCURRENCY, keyword.value)
            return
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            return
        celery_config = self.context.names.module.rpartition(".")[2] == celery.CONFIG_MODULE
        for target in targets:
            if _names_concurrency(target, celery_config):
                self._setting(celery.CONCURRENCY, value)
            elif isinstance(target, ast.Name) and target.id == "DATABASES" and isinstance(value, ast.Dict):
                default = _entry(value, "default")
                if isinstance(default, ast.Dict) and (age := _entry(default, "CONN_MAX_AGE")) is not None:
                    self._setting("CONN_MAX_AGE", age)
                elif isinstance(default, ast.Call):  # dj_database_url.config(conn_max_age=600)
                    for keyword in default.keywords:
                        if keyword.arg == "conn_max_age":
                            self._setting("CONN_MAX_AGE", keyword.value)
            elif _subscripts(target) == ["DATABASES", "default", "CONN_MAX_AGE"]:
                self._setting("CONN_MAX_AGE", value)

    def _setting(self, setting: str, node: ast.expr) -> None:
        value = self.values.number(node, self.scope)
        unresolved = value.reason if isinstance(value, Unresolved) else None
        number = None if isinstance(value, Unresolved) else value
        record_fact(
            DatabaseSetting(
                node.lineno, self.context.column(node.lineno, node.col_offset), setting, number, unresolved
            ),
            self.context,
        )

    def _engine_calls(self, value: ast.expr) -> Iterator[ast.Call]:
        """The engine factory calls `value` makes as the module runs (`sessionmaker(bind=create_engine(...))`
        too; not those in a lambda, which runs later)."""
        pending: list[ast.AST] = [value]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Call) and self.resolve(node.func) in ENGINE_FACTORIES:
                yield node
            pending.extend(ast.iter_child_nodes(node))

    def _engine_pool(self, call: ast.Call) -> EnginePool:
        """The most connections the pool of the engine `call` creates keeps in one process."""
        line, col = call.lineno, call.col_offset + 1
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        url = self.values.string(call.args[0], self.scope) if call.args else None
        if any(keyword.arg is None for keyword in call.keywords):
            hidden = f"{ast.unparse(call.func)}(**...) hides its pool arguments from the gate"
            return EnginePool(line, col, "?", None, "", hidden)
        if "pool" in keywords:
            return EnginePool(line, col, "?", None, "", "pool=: a pool built outside the engine's arguments")
        pool = "AsyncAdaptedQueuePool" if self.resolve(call.func) == ASYNC_ENGINE_FACTORY else "QueuePool"
        if (poolclass := keywords.get("poolclass")) is not None:
            dotted = self.resolve(poolclass) or ""
            pool = dotted.rpartition(".")[2]
            known = QUEUE_POOLS | ONE_CONNECTION_POOLS | UNCOUNTED_POOLS | {"SingletonThreadPool"}
            if not dotted.startswith("sqlalchemy.") or pool not in known:
                return EnginePool(
                    line,
                    col,
                    "?",
                    None,
                    "",
                    f"poolclass={ast.unparse(poolclass)} is not a pool of SQLAlchemy's the gate knows",
                )
        if pool in UNCOUNTED_POOLS:
            return EnginePool(line, col, pool, None, f"{pool} keeps no connection", None)
        if isinstance(url, str) and url.startswith("sqlite"):
            return EnginePool(line, col, pool, None, "SQLite: a file, no server connections", None)
        if pool in ONE_CONNECTION_POOLS:
            return EnginePool(line, col, pool, 1, f"{pool}: one connection", None)
        names = ("pool_size",) if pool == "SingletonThreadPool" else ("pool_size", "max_overflow")
        sizes: list[str] = []
        total = 0
        for name in names:
            node = keywords.get(name)
            if node is None:
                total += ENGINE_DEFAULTS[name]
                sizes.append(f"{name} {ENGINE_DEFAULTS[name]} (SQLAlchemy's default)")
                continue
            value = self.values.number(node, self.scope)
            if isinstance(value, Unresolved):
                return EnginePool(line, col, pool, None, "", f"{name}: {value.reason}")
            unbounded = (name == "pool_size" and value == 0 and pool != "SingletonThreadPool") or (
                name == "max_overflow" and value == -1
            )
            if unbounded:
                return EnginePool(line, col, pool, None, "", f"{name}={value:g} puts no limit on the pool")
            minimum = 1 if name == "pool_size" else 0
            if value is None or value != int(value) or value < minimum:
                shown = f"{name} must be a whole number >= {minimum}, got {ast.unparse(node)}"
                return EnginePool(line, col, pool, None, "", shown)
            total += int(value)
            sizes.append(f"{name} {int(value)} at {self.context.relpath}:{node.lineno}")
        return EnginePool(line, col, pool, total, " + ".join(sizes), None)

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
            col=self.context.column(call.lineno, call.col_offset),
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
        runtime_modules = {relpath: module_name_for(relpath, config.root)[0] for relpath, _ in declared}
        for relpath, fact in sorted(declared, key=lambda item: (item[0], item[1].line)):
            where = f"{relpath}:{fact.line}"
            processes = runtime_processes(relpath, runtime_modules, deployments, config)
            # A deployment's [tool.corral] max-conns stands in for a pool size the code reads at run time.
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
                max_conns_from = "[tool.corral] max-conns"
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


class CeleryWorkers(NamedTuple):
    """One term of the Celery budget: a worker's concurrency and processes, and where each came from."""

    concurrency: int
    concurrency_from: str
    processes: int
    processes_from: str


class CeleryBudgetCheck(ProjectCheck):
    """The Celery half: Celery's worker children against the database when Django keeps their connections
    open. Each child (of the prefork pool, or each thread or greenlet of the others) keeps one connection
    to the `default` database between tasks when `CONN_MAX_AGE` is not 0, so the workers hold
    `concurrency x processes` connections, summed over every compose service or Kubernetes container
    running `celery worker`, against the database's `max-conns` from `[tool.corral]` x `reserve`.

    Checked only when all it needs is declared: `max-conns` in `[tool.corral]`, a non-zero (or None)
    `CONN_MAX_AGE` in a settings module, and a worker concurrency (`-c N` / `--concurrency N` on the
    worker's command, else `CELERY_WORKER_CONCURRENCY`, `app.conf.worker_concurrency` or
    `app.conf.update(worker_concurrency=N)`; with no deployment file running `celery worker`, one process).
    With `CONN_MAX_AGE = 0` (Django's default) a child holds a connection only while its task queries,
    which the gate cannot bound: nothing is reported. A worker without a concurrency (Celery's default is
    the host's CPU count), settings modules that disagree, or a value the gate cannot read is CRL302, and so is
    a deployment file it cannot read (not valid YAML, say) even when no readable one runs `celery worker`."""

    rule = ConnectionBudget
    fact = DatabaseSetting

    def run(self, facts_by_file: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
        settings = sorted(recorded(DatabaseSetting, facts_by_file), key=lambda item: (item[0], item[1].line))
        ages = [(relpath, fact) for relpath, fact in settings if fact.setting == "CONN_MAX_AGE"]
        concurrencies = [(relpath, fact) for relpath, fact in settings if fact.setting == celery.CONCURRENCY]
        if config.max_conns is None or not ages:
            return []
        program = celery.WORKER_PROGRAM
        deployments = read_deployments(config.root, config.kubernetes_manifests, frozenset({program}))
        services = [worker for worker in deployments.workers if worker.command.program == program]
        unreadable = [
            (value.path, value.line, value.reason)
            for value in deployments.unreadable
            if value.command is None or value.command.program == program
        ]
        # A deployment file the gate cannot read may be the one that runs the workers: no silent pass.
        if not services and not concurrencies and not unreadable:
            return []
        # Celery's command line overrides its settings: the settings' concurrency is read (and an unreadable
        # or disagreeing one is a problem) only when some worker takes its concurrency from them.
        from_settings = not services or any(
            celery.worker_concurrency(service.command.arguments) is None for service in services
        )
        problems = [
            (relpath, fact.line, f"{fact.setting}: {fact.unresolved}")
            for relpath, fact in settings
            if fact.unresolved and (from_settings or fact.setting != celery.CONCURRENCY)
        ]
        age = _agreed(ages, problems)
        if age is not None and age[1].value == 0 and all(fact.unresolved is None for _, fact in ages):
            return []  # connections closed after each task: not bounded statically
        setting = _agreed(concurrencies, problems) if from_settings else None
        if setting is not None and (
            setting[1].value is None or setting[1].value != int(setting[1].value) or setting[1].value < 1
        ):
            shown = f"must be a whole number >= 1, got {_number(setting[1].value)}"
            problems.append((setting[0], setting[1].line, f"{setting[1].setting} {shown}"))
            setting = None
        terms: list[CeleryWorkers] = []
        for service in services:
            where = f"from {service.path}:{service.line} ({service.origin})"
            concurrency = celery.worker_concurrency(service.command.arguments)
            if isinstance(concurrency, str):
                path, _, line = service.command_at.rpartition(":")
                problems.append((path, int(line), f"{service.origin}: its {program} worker command has {concurrency}"))
            elif concurrency is not None:
                terms.append(CeleryWorkers(concurrency, "from --concurrency on its command", service.processes, where))
            elif setting is not None and setting[1].value is not None:
                origin = f"from {celery.CONCURRENCY} at {setting[0]}:{setting[1].line}"
                terms.append(CeleryWorkers(int(setting[1].value), origin, service.processes, where))
            elif not concurrencies:  # else a settings module's unreadable or disagreeing value is the problem
                reason = f"the {program} worker here ({service.origin}) has no --concurrency and no worker_concurrency"
                problems.append((service.path, service.line, f"{reason}: {celery.DEFAULT_CONCURRENCY}"))
        if not services and setting is not None and setting[1].value is not None:
            origin = f"from {celery.CONCURRENCY} at {setting[0]}:{setting[1].line}"
            terms.append(CeleryWorkers(int(setting[1].value), origin, 1, f"(no deployment file runs {program} worker)"))
        problems += unreadable
        return self._report(problems, age or ages[0], terms, config, reports)

    def _report(
        self,
        problems: list[tuple[str, int, str]],
        age: tuple[str, DatabaseSetting],
        terms: list[CeleryWorkers],
        config: Config,
        reports: dict[str, Any],
    ) -> list[Finding]:
        """The findings and the budget entry."""
        relpath, setting = age
        where = f"{relpath}:{setting.line}"
        findings = []
        for path, line, reason in problems:
            message = f"{reason}; the connections of the {celery.WORKERS} against max-conns cannot be counted"
            findings.append(
                Finding(path, line, 1, ConnectionBudget.UNPROVEN, f"{message}: state the value as a number")
            )
        entry: dict[str, Any] = {"kind": celery.WORKER_PROGRAM, "path": relpath, "line": setting.line, "ok": None}
        entry["problems"] = len(problems)
        if terms and not problems:
            from corral.runtime.budget import compute_budget

            assert config.max_conns is not None  # the check runs only against a configured max-conns
            # The runtime's arithmetic, each worker's connections as one term (a worker scaled to 0 adds none).
            budget = compute_budget(
                [
                    (f"{celery.WORKER_PROGRAM} {index}", term.concurrency * term.processes)
                    for index, term in enumerate(terms)
                    if term.processes
                ],
                relay=0,
                max_conns=config.max_conns,
                reserve=config.reserve,
            )
            total, limit = budget.total, budget.limit
            summed = " + ".join(f"concurrency {term.concurrency} x processes {term.processes}" for term in terms)
            relation = "<=" if budget.ok else ">"
            arithmetic = (
                f"{summed} = {total} {relation} {limit} (max_conns {config.max_conns} x reserve {config.reserve:g})"
            )
            kept = "for ever" if setting.value is None else f"{setting.value:g} s"
            sources = [
                f"concurrency {term.concurrency} {term.concurrency_from}; "
                f"processes {term.processes} {term.processes_from}"
                for term in terms
            ]
            sources.append(f"CONN_MAX_AGE {kept} at {where}: each worker child keeps its connection")
            entry.update(terms=[term._asdict() for term in terms], total=total, limit=limit, ok=budget.ok)
            entry.update(max_conns=config.max_conns, reserve=config.reserve, arithmetic=arithmetic, sources=sources)
            if not budget.ok:
                message = (
                    f"{celery.WORKERS} could hold more database connections than their share: {arithmetic}; "
                    f"Django keeps each worker child's connection open (CONN_MAX_AGE {kept}): lower the "
                    f"concurrency or the processes, or raise [tool.corral] max-conns ({'; '.join(sources[:-1])})"
                )
                findings.append(Finding(relpath, setting.line, setting.col, ConnectionBudget.OVER_BUDGET, message))
        if terms or problems:
            reports.setdefault(ConnectionBudgetCheck.REPORT, []).append(entry)
        return findings


class EngineBudgetCheck(ProjectCheck):
    """The SQLAlchemy half: the pools of the engines declared at a module's top level against the database's
    `max_conns` from `[tool.corral]` x `reserve`. Each process that imports the module builds its own engine,
    so each engine keeps up to its pool's connections (`pool_size + max_overflow`, SQLAlchemy's defaults 5 and
    10) in every process: the sum over the engines times the processes.

    The processes: `[tool.corral] processes` when set; else gunicorn's `workers` from `gunicorn.conf.py`; else
    1. When the deployment files run workers (`corral worker`, `celery worker`) the gate cannot tell which
    processes import the engine's module (a Celery prefork child is a process of its own): CRL302 at the
    worker, asking for `processes`. Checked only when `max_conns` is configured; an engine whose pool keeps no
    connection (NullPool, SQLite) adds nothing; a pool size the gate cannot read, an unlimited pool
    (`pool_size=0`, `max_overflow=-1`) or a pool class it does not know is CRL302."""

    rule = ConnectionBudget
    fact = EnginePool
    KIND: ClassVar[str] = "sqlalchemy"

    def run(self, facts_by_file: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
        engines = sorted(recorded(EnginePool, facts_by_file), key=lambda item: (item[0], item[1].line))
        if config.max_conns is None or not engines:
            return []
        problems = [(relpath, fact.line, fact.unresolved) for relpath, fact in engines if fact.unresolved]
        counted = [(relpath, fact) for relpath, fact in engines if fact.connections]
        processes, processes_from = self._processes(config, problems)
        relpath, first = engines[0]
        findings = [
            Finding(
                path,
                line,
                1,
                ConnectionBudget.UNPROVEN,
                f"{reason}; the connections of the SQLAlchemy engines against [tool.corral] max-conns cannot be "
                "counted: state the value as a number",
            )
            for path, line, reason in problems
        ]
        entry: dict[str, Any] = {"kind": self.KIND, "path": relpath, "line": first.line, "ok": None}
        entry["problems"] = len(problems)
        if counted and not problems:
            from corral.runtime.budget import compute_budget

            assert config.max_conns is not None and processes is not None
            # The runtime's arithmetic: each engine's pool as a term, in every process.
            budget = compute_budget(
                [(f"engine {path}:{fact.line}", fact.connections or 0) for path, fact in counted],
                relay=0,
                max_conns=config.max_conns,
                reserve=config.reserve,
                processes=processes,
            )
            summed = " + ".join(f"{name} {connections}" for name, connections in budget.queues)
            summed = f"({summed}) x processes {processes}" if processes > 1 else summed
            relation = "<=" if budget.ok else ">"
            arithmetic = (
                f"{summed} = {budget.total} {relation} {budget.limit} "
                f"(max_conns {config.max_conns} x reserve {config.reserve:g})"
            )
            sources = [f"engine {path}:{fact.line} ({fact.pool}): {fact.origin}" for path, fact in counted]
            sources.append(f"processes {processes} {processes_from}: each process keeps its own pools")
            uncounted = [
                f"engine {path}:{fact.line}: {fact.origin}, not counted"
                for path, fact in engines
                if not fact.connections
            ]
            entry.update(total=budget.total, limit=budget.limit, ok=budget.ok, processes=processes)
            entry.update(max_conns=config.max_conns, reserve=config.reserve, arithmetic=arithmetic)
            entry["sources"] = sources + uncounted
            if not budget.ok:
                message = (
                    f"SQLAlchemy engines could hold more database connections than their share: {arithmetic}; "
                    f"every process keeps its own pool: lower pool_size/max_overflow or the processes, or raise "
                    f"[tool.corral] max-conns ({'; '.join(sources)})"
                )
                path, fact = counted[0]
                findings.append(Finding(path, fact.line, fact.col, ConnectionBudget.OVER_BUDGET, message))
        if counted or problems:
            reports.setdefault(ConnectionBudgetCheck.REPORT, []).append(entry)
        return findings

    @staticmethod
    def _processes(config: Config, problems: list[tuple[str, int, str]]) -> tuple[int | None, str]:
        """How many processes hold the engines and where that count comes from; what cannot be counted goes
        to `problems` (None then)."""
        if config.processes is not None:
            return config.processes, "from [tool.corral] processes"
        deployments = read_deployments(config.root, config.kubernetes_manifests, frozenset({celery.WORKER_PROGRAM}))
        problems += [(value.path, value.line, value.reason) for value in deployments.unreadable]
        for worker in deployments.workers:
            reason = (
                f"the deployment runs {worker.command.program} worker ({worker.origin}), and the gate cannot tell "
                "which processes import the engines' modules (each keeps its own pools): set processes in [tool.corral]"
            )
            problems.append((worker.path, worker.line, reason))
        web = deployments.web
        if isinstance(web, UnreadableCount):
            problems.append((web.path, web.line, web.reason))
        elif web is not None:
            return web.workers, f"from {web.path}:{web.line} (gunicorn workers)"
        return (None, "") if problems else (1, "(no deployment file declares how many processes run the project)")


def _agreed(
    settings: list[tuple[str, DatabaseSetting]], problems: list[tuple[str, int, str]]
) -> tuple[str, DatabaseSetting] | None:
    """The one value several settings modules give a setting (None: none readable, or they disagree, which
    is a problem: the gate cannot tell which settings module the workers run with)."""
    readable = [(relpath, fact) for relpath, fact in settings if fact.unresolved is None]
    if len({fact.value for _, fact in readable}) > 1:
        shown = ", ".join(f"{_number(fact.value)} at {relpath}:{fact.line}" for relpath, fact in readable)
        relpath, fact = readable[0]
        problems.append((relpath, fact.line, f"settings modules disagree on {fact.setting} ({shown})"))
        return None
    return readable[0] if readable else None


def _number(value: float | None) -> str:
    return "None" if value is None else f"{value:g}"


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

    def runs_it(command: WorkerCommand | None) -> bool:
        # A file the gate could not read may run any worker; with one runtime in the project every corral
        # worker command runs it; else the command must name its module.
        if command is None:
            return True
        named = command.target.partition(":")[0]
        return command.program == "corral" and (len(runtime_modules) == 1 or named_module(named, module))

    problems = [(value.path, value.line, value.reason) for value in deployments.unreadable if runs_it(value.command)]
    others = set(runtime_modules.values())
    for worker in deployments.workers:
        named = worker.command.target.partition(":")[0]
        if worker.command.program == "corral" and len(others) > 1 and not any(named_module(named, m) for m in others):
            target = worker.command.target
            shown = f"corral worker {target}" if target else "corral worker without MODULE:RUNTIME"
            reason = f"{worker.origin} runs {shown}, which names none of the modules declaring the project's runtimes"
            problems.append((worker.path, worker.line, reason))
    # A worker scaled to 0 runs no process.
    mine = [worker for worker in deployments.workers if runs_it(worker.command) and worker.processes]
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


def named_module(named: str, module: str) -> bool:
    """Whether a worker command's `MODULE` is `module` (also when the project keeps it below `src/`)."""
    return bool(named) and (named == module or module.endswith(f".{named}"))


def render_budget(entries: list[dict[str, Any]]) -> str:
    """The text table `corral check --budget` prints (and prints by itself when a budget fails)."""
    if not entries:
        return "No corral Runtime(...) declared: no connection budget to check.\n"
    lines = []
    for entry in entries:
        where = f"{entry['path']}:{entry['line']}"
        if entry.get("kind") in (celery.WORKER_PROGRAM, EngineBudgetCheck.KIND):
            lines.extend(_render_database(entry, where))
            continue
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


def _render_database(entry: dict[str, Any], where: str) -> list[str]:
    """The table of a budget against the database: the Celery workers' or the SQLAlchemy engines'."""
    if entry["kind"] == EngineBudgetCheck.KIND:
        title = f"budget of the SQLAlchemy engines (the first at {where})"
    else:
        title = f"budget of the {celery.WORKERS} (connections kept by {where})"
    if entry["ok"] is None:
        return [f"{title}: cannot be proven ({entry['problems']} unresolved value(s), see {ConnectionBudget.UNPROVEN})"]
    return [
        f"{title}: {'ok' if entry['ok'] else 'OVER'}",
        *(f"  {source}" for source in entry["sources"]),
        f"  {entry['arithmetic']}",
    ]
