"""Job kinds: where a module declares background job kinds, per framework, and the hard timeout each has.

One place answers "what job kinds does this file declare, and what hard timeout provably applies?" for
the CRL2 rules, the `jobs` report and `corral fix`. Per framework (see the CRL2 section of README.md):

- corral: `@queue.job("kind", timeout=...)` / `@queue.periodic(...)`, else the `Queue(..., timeout=...)`.
- Celery: `@app.task` / `@shared_task` / `@current_app.task`: `time_limit` from the decorator, its `base=`
  class, the app's `task_cls`, or the app's configuration (constructor keywords, `app.conf.X = ...`,
  `app.conf.update(...)`, `config_from_object(...)` including Django settings with a namespace). A
  `@shared_task` binds to whichever app runs it, so every Celery app of the project must give a limit.
- Dramatiq, RQ, arq, SAQ: the framework's documented default counts unless the declaration turns the
  limit off; strict mode demands an explicit declaration.
- taskiq: no default; `timeout=` on an `async def` task (taskiq cannot interrupt a sync one).
- Huey, Procrastinate: no hard timeout; the body must run inside `asyncio.timeout(N)` / `asyncio.wait_for`.
"""

from __future__ import annotations

import ast
import math
import re
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Located, StaticValues, Unresolved

if TYPE_CHECKING:
    from corral.gates.analysis.context import FileContext

# The ways a job kind fails (`JobKind.failure`); the CRL2 rule reports each under a code of its own.
CORRAL, CELERY, OTHER, UNRESOLVED = "no corral timeout", "no celery time limit", "no framework limit", "unresolved"

DECORATOR, QUEUE, BASE_CLASS, APP_CONFIG, DEFAULT, WORKER, BODY = (
    "decorator",
    "queue",
    "base class",
    "app config",
    "framework default",
    "worker settings",
    "asyncio timeout in body",
)

# Documented default hard limits, in seconds.
DEFAULTS = {"dramatiq": 600.0, "rq": 180.0, "arq": 300.0, "saq": 10.0}

CORRAL_QUEUES = frozenset({"corral.runtime.Queue", "corral.runtime.declarations.Queue"})
CELERY_APPS = frozenset({"celery.Celery", "celery.app.Celery", "celery.app.base.Celery"})
CELERY_SHARED = frozenset({"celery.shared_task", "celery.app.shared_task", "celery.current_app.task"})
CELERY_TASKS = frozenset({"celery.Task", "celery.app.task.Task", "celery.task.Task"})
DRAMATIQ_ACTORS = frozenset({"dramatiq.actor", "dramatiq.actor.actor"})
RQ_JOBS = frozenset({"rq.decorators.job"})
ARQ_FUNCS = frozenset({"arq.func", "arq.worker.func", "arq.cron", "arq.cron.cron"})
SAQ_CRON = frozenset({"saq.CronJob", "saq.job.CronJob"})
PROCRASTINATE_APPS = frozenset({"procrastinate.App", "procrastinate.app.App"})
HUEY_DJANGO = frozenset(
    {f"huey.contrib.djhuey.{name}" for name in ("task", "periodic_task", "db_task", "db_periodic_task")}
)
HUEY_METHODS = frozenset({"task", "periodic_task", "db_task", "db_periodic_task"})
ASYNC_TIMEOUTS = frozenset({"asyncio.timeout", "asyncio.timeouts.timeout"})
WAIT_FOR = frozenset({"asyncio.wait_for", "asyncio.tasks.wait_for"})
_RQ_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", re.IGNORECASE)
_RQ_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

Function = ast.FunctionDef | ast.AsyncFunctionDef


class JobKind(NamedTuple):
    """One declared job kind. `timeout` is the effective hard limit in seconds (None: none proven) and
    `source` where it comes from; `failure` (CORRAL, CELERY, OTHER or UNRESOLVED) and `problem` say why it
    fails (None when it passes)."""

    framework: str
    name: str
    queue: str | None
    node: ast.expr
    function: Function | None
    timeout: float | None
    source: str | None
    failure: str | None = None
    problem: str | None = None


class _Limit(NamedTuple):
    """A limit read from one place: seconds, or why there is none (`off`), or unresolvable."""

    seconds: float | None = None
    off: str | None = None
    unresolved: Unresolved | None = None


_UNSET = _Limit()


def job_kinds(context: FileContext) -> list[JobKind]:
    """Every job kind the checked file declares (computed once per file, shared by the CRL2 rules)."""
    known = _BY_CONTEXT.get(context)
    if known is None:
        finder = _Finder(StaticValues.of(context), strict=context.config.strict)
        finder.walk(context.tree.body, context.names.root)
        known = _BY_CONTEXT[context] = finder.kinds
    return known


_BY_CONTEXT: weakref.WeakKeyDictionary[FileContext, list[JobKind]] = weakref.WeakKeyDictionary()


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for item in call.keywords:
        if item.arg == name:
            return item
    return None


def _has_double_star(call: ast.Call) -> bool:
    return any(item.arg is None for item in call.keywords)


def _string_argument(call: ast.Call, values: StaticValues, scope: Scope | None, position: int = 0) -> str | None:
    if len(call.args) > position:
        found = values.string(call.args[position], scope)
        return found if isinstance(found, str) else None
    return None


class _Finder:
    def __init__(self, values: StaticValues, *, strict: bool) -> None:
        self.values = values
        self.names = values.module.names
        self.strict = strict
        self.kinds: list[JobKind] = []
        self.seen_calls: set[int] = set()
        self._celery_apps: list[Located] | None = None

    # -- walking -------------------------------------------------------------------------------

    def walk(self, body: list[ast.stmt], scope: Scope) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in statement.decorator_list:
                    self._decorator(decorator, statement, scope)
                self._calls(statement.decorator_list, scope)
                self.walk(statement.body, self.names.scope_of(statement))
            elif isinstance(statement, ast.ClassDef):
                self._arq_settings(statement, scope)
                self.walk(statement.body, self.names.scope_of(statement))
            elif isinstance(statement, ast.If) and _is_type_checking(statement, self.values, scope):
                self.walk(statement.orelse, scope)
            else:
                nested = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody", "handlers")]
                self._calls([child for child in ast.iter_child_nodes(statement) if isinstance(child, ast.expr)], scope)
                for block in nested:
                    if isinstance(block, list):
                        self.walk([item for item in block if isinstance(item, ast.stmt)], scope)
                        for handler in block:
                            if isinstance(handler, ast.ExceptHandler):
                                self.walk(handler.body, scope)
                for case in getattr(statement, "cases", ()):
                    self.walk(case.body, scope)

    def _calls(self, expressions: list[ast.expr], scope: Scope) -> None:
        """arq `func(...)`/`cron(...)`, SAQ `CronJob(...)` and SAQ settings dicts among `expressions`."""
        for expression in expressions:
            for node in ast.walk(expression):
                if isinstance(node, ast.Call) and id(node) not in self.seen_calls:
                    called = self.values.dotted(node.func, scope)
                    if called in ARQ_FUNCS:
                        self._arq_function(node, node, scope, None)
                    elif called in SAQ_CRON:
                        self._saq_cron(node, scope)
                elif isinstance(node, ast.Dict) and self._imports("saq"):
                    for key, value in zip(node.keys, node.values, strict=True):
                        if isinstance(key, ast.Constant) and key.value == "functions":
                            self._saq_functions(value, scope)

    def _imports(self, package: str) -> bool:
        return any(
            target == package or target.startswith(package + ".") for target in self.names.root.bindings.values()
        )

    # -- decorators ----------------------------------------------------------------------------

    def _decorator(self, decorator: ast.expr, function: Function, scope: Scope) -> None:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call is not None else decorator
        called = self.values.dotted(target, scope)
        if called in CELERY_SHARED:
            self._celery(decorator, call, function, scope, None)
        elif called in DRAMATIQ_ACTORS:
            self._dramatiq(decorator, call, function, scope)
        elif called in RQ_JOBS:
            self._rq(decorator, call, function, scope)
        elif called in HUEY_DJANGO:
            self._body_only("huey", decorator, function)
        elif isinstance(target, ast.Attribute):
            owner = self.values.definition(target.value, scope)
            if isinstance(owner, Unresolved) or not isinstance(owner.node, ast.Call):
                return
            made = owner.values.dotted(owner.node.func)
            attribute = target.attr
            if made in CORRAL_QUEUES and attribute in ("job", "periodic") and call is not None:
                self._corral(call, function, scope, owner)
            elif made in CELERY_APPS and attribute == "task":
                self._celery(decorator, call, function, scope, owner)
            elif made is not None and made.split(".")[0].startswith("taskiq") and attribute == "task":
                self._taskiq(decorator, call, function, scope)
            elif made is not None and made.split(".")[0] == "huey" and attribute in HUEY_METHODS:
                self._body_only("huey", decorator, function)
            elif made in PROCRASTINATE_APPS and attribute == "task":
                self._body_only("procrastinate", decorator, function)

    def _limit(
        self, expression: ast.expr, scope: Scope | None, label: str, values: StaticValues | None = None
    ) -> _Limit:
        """A limit expression: positive seconds, `None` (unset), zero/negative (off) or unresolvable."""
        evaluator = values or self.values
        value = evaluator.number(expression, scope)
        if isinstance(value, Unresolved):
            return _Limit(unresolved=value)
        if value is None:
            return _UNSET
        if value <= 0 or not math.isfinite(value):
            return _Limit(off=f"{label}={_number(value)} is no limit")
        return _Limit(seconds=value)

    def _add(
        self,
        framework: str,
        node: ast.expr,
        function: Function | None,
        *,
        name: str | None = None,
        queue: str | None = None,
        timeout: float | None = None,
        source: str | None = None,
        failure: str | None = None,
        problem: str | None = None,
    ) -> None:
        shown = name or (function.name if function is not None else ast.unparse(node))
        self.kinds.append(JobKind(framework, shown, queue, node, function, timeout, source, failure, problem))

    def _fail(
        self,
        framework: str,
        node: ast.expr,
        function: Function | None,
        failure: str,
        problem: str,
        *,
        name: str | None = None,
        queue: str | None = None,
    ) -> None:
        self._add(framework, node, function, name=name, queue=queue, failure=failure, problem=problem)

    # -- corral --------------------------------------------------------------------------------

    def _corral(self, call: ast.Call, function: Function, scope: Scope, queue: Located) -> None:
        assert isinstance(queue.node, ast.Call)
        queue_name = _string_argument(queue.node, queue.values, None)
        kind_name = _string_argument(call, self.values, scope) or function.name
        if _has_double_star(call) and keyword(call, "timeout") is None:
            problem = f"job kind {kind_name!r}: timeout may come from **kwargs, which the gate cannot read"
            self._fail("corral", call, function, UNRESOLVED, problem, name=kind_name, queue=queue_name)
            return
        own = keyword(call, "timeout")
        limit = self._limit(own.value, scope, "timeout") if own is not None else _UNSET
        if limit.unresolved is not None:
            self._fail(
                "corral", call, function, UNRESOLVED, f"timeout {limit.unresolved}", name=kind_name, queue=queue_name
            )
            return
        if limit.off is not None:
            self._fail(
                "corral",
                call,
                function,
                CORRAL,
                f"job kind {kind_name!r}: {limit.off}",
                name=kind_name,
                queue=queue_name,
            )
            return
        if limit.seconds is not None:
            self._add(
                "corral", call, function, timeout=limit.seconds, source=DECORATOR, name=kind_name, queue=queue_name
            )
            return
        inherited = keyword(queue.node, "timeout")
        if inherited is None and _has_double_star(queue.node):
            problem = f"queue {queue_name!r}: timeout may come from **kwargs, which the gate cannot read"
            self._fail("corral", call, function, UNRESOLVED, problem, name=kind_name, queue=queue_name)
            return
        limit = self._limit(inherited.value, None, "timeout", queue.values) if inherited is not None else _UNSET
        if limit.unresolved is not None:
            self._fail(
                "corral",
                call,
                function,
                UNRESOLVED,
                f"queue {queue_name!r} timeout {limit.unresolved}",
                name=kind_name,
                queue=queue_name,
            )
        elif limit.seconds is not None:
            self._add("corral", call, function, timeout=limit.seconds, source=QUEUE, name=kind_name, queue=queue_name)
        else:
            why = limit.off or "has no timeout"
            queue_shown = f"queue {queue_name!r}" if queue_name else "its queue"
            problem = f"job kind {kind_name!r} has no timeout: {queue_shown} {why}; give the job timeout=..."
            self._fail("corral", call, function, CORRAL, problem, name=kind_name, queue=queue_name)

    # -- Celery --------------------------------------------------------------------------------

    def _celery(
        self, decorator: ast.expr, call: ast.Call | None, function: Function, scope: Scope, app: Located | None
    ) -> None:
        name = (_string_keyword(call, "name", self.values, scope) if call is not None else None) or function.name
        queue = _string_keyword(call, "queue", self.values, scope) if call is not None else None
        if call is not None and _has_double_star(call) and keyword(call, "time_limit") is None:
            problem = f"task {name}: time_limit may come from **kwargs, which the gate cannot read"
            self._fail("celery", decorator, function, UNRESOLVED, problem, name=name, queue=queue)
            return
        steps: list[tuple[str, _Limit]] = []
        own = keyword(call, "time_limit") if call is not None else None
        if own is not None:
            steps.append((DECORATOR, self._limit(own.value, scope, "time_limit")))
        base = keyword(call, "base") if call is not None else None
        if base is not None:
            steps.append((BASE_CLASS, self._class_limit(base.value, scope, self.values)))
        for source, limit in steps:
            if limit.unresolved is not None:
                self._fail(
                    "celery", decorator, function, UNRESOLVED, f"time_limit {limit.unresolved}", name=name, queue=queue
                )
                return
            if limit.off is not None:
                self._fail("celery", decorator, function, CELERY, f"task {name}: {limit.off}", name=name, queue=queue)
                return
            if limit.seconds is not None:
                self._add("celery", decorator, function, timeout=limit.seconds, source=source, name=name, queue=queue)
                return
        apps = [app] if app is not None else self._project_celery_apps()
        if not apps:
            problem = f"task {name} has no time_limit and no Celery app of the project sets task_time_limit"
            self._fail("celery", decorator, function, CELERY, problem, name=name, queue=queue)
            return
        seconds: list[float] = []
        sources: set[str] = set()
        for each in apps:
            source, limit = self._app_limit(each)
            where = each.values.where(each.node)
            if limit.unresolved is not None:
                problem = f"task {name}: the app's task_time_limit {limit.unresolved}"
                self._fail("celery", decorator, function, UNRESOLVED, problem, name=name, queue=queue)
                return
            if limit.seconds is None:
                why = limit.off or "sets no task_time_limit"
                problem = (
                    f"task {name} has no time_limit and the Celery app at {where} {why}; soft_time_limit does not count"
                )
                self._fail("celery", decorator, function, CELERY, problem, name=name, queue=queue)
                return
            seconds.append(limit.seconds)
            sources.add(source)
        source = sources.pop() if len(sources) == 1 else APP_CONFIG
        self._add("celery", decorator, function, timeout=min(seconds), source=source, name=name, queue=queue)

    def _class_limit(self, expression: ast.expr, scope: Scope | None, values: StaticValues) -> _Limit:
        located = values.definition(expression, scope)
        if isinstance(located, Unresolved):
            return _Limit(unresolved=located)
        if isinstance(located.node, ast.expr):
            # task_cls="proj.tasks:MyTask": a class named by a string.
            text = located.values.string(located.node)
            if isinstance(text, Unresolved):
                return _Limit(unresolved=text)
            located = self.values.lookup(text.replace(":", "."), expression)
            if isinstance(located, Unresolved):
                return _Limit(unresolved=located)
        if not isinstance(located.node, ast.ClassDef):
            return _Limit(unresolved=values.unresolved(expression, f"{ast.unparse(expression)} is not a class"))
        found = located.values.class_attribute(located, "time_limit", CELERY_TASKS)
        if found is None:
            return _UNSET
        if isinstance(found, Unresolved):
            return _Limit(unresolved=found)
        if not isinstance(found.node, ast.expr):
            return _Limit(unresolved=found.values.unresolved(found.node, "time_limit is not a value"))
        return self._limit(found.node, None, "time_limit", found.values)

    def _project_celery_apps(self) -> list[Located]:
        """Every `X = Celery(...)` of the project (a shared task runs under whichever app imports it)."""
        if self._celery_apps is None:
            apps: list[Located] = []
            modules = [self.values.module]
            for relpath in self.values.project.files_containing(b"Celery("):
                if relpath != self.values.module.relpath:
                    module = self.values.project.file(relpath)
                    if module is not None:
                        modules.append(module)
            for module in modules:
                values = self.values.for_module(module)
                for bindings in module.bindings.values():
                    for binding in bindings:
                        if isinstance(binding, ast.Call) and values.dotted(binding.func) in CELERY_APPS:
                            apps.append(Located(binding, values))
            self._celery_apps = apps
        return self._celery_apps

    def _app_limit(self, app: Located) -> tuple[str, _Limit]:
        """The task time limit an app gives tasks without one: its task_cls, then its configuration."""
        assert isinstance(app.node, ast.Call)
        values = app.values
        task_cls = keyword(app.node, "task_cls")
        if task_cls is not None:
            limit = self._class_limit(task_cls.value, None, values)
            if limit != _UNSET:
                return BASE_CLASS, limit
        app_names = {name for name, bindings in values.module.bindings.items() if any(b is app.node for b in bindings)}
        direct: _Limit = _UNSET
        namespace = _string_keyword(app.node, "namespace", values, None)
        setting = keyword(app.node, "task_time_limit")
        if setting is not None:
            direct = self._setting(setting.value, values)
        elif _has_double_star(app.node):
            direct = _Limit(unresolved=values.unresolved(app.node, "Celery(**...) may set task_time_limit"))
        from_object: _Limit = _UNSET
        for statement in _top_level(values.module.tree.body):
            found = self._conf_statement(statement, app_names, values)
            if found is not None:
                direct = found
            loaded = self._config_from_object(statement, app_names, values, namespace)
            if loaded is not None:
                from_object = loaded
        # Changes made on the app (constructor keywords, conf.X = ..., conf.update) take precedence over
        # the configuration object, as in Celery.
        return APP_CONFIG, direct if direct != _UNSET else from_object

    def _setting(self, expression: ast.expr, values: StaticValues) -> _Limit:
        """A task_time_limit set on the app itself: None there overrides any configuration object."""
        limit = self._limit(expression, None, "task_time_limit", values)
        return _Limit(off="sets task_time_limit=None") if limit == _UNSET else limit

    def _conf_statement(self, statement: ast.stmt, app_names: set[str], values: StaticValues) -> _Limit | None:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "task_time_limit"
                and _is_conf(target.value, app_names)
            ):
                return self._setting(statement.value, values)
            if (
                isinstance(target, ast.Subscript)
                and _is_conf(target.value, app_names)
                and isinstance(target.slice, ast.Constant)
                and target.slice.value == "task_time_limit"
            ):
                return self._setting(statement.value, values)
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "update"
                and _is_conf(call.func.value, app_names)
            ):
                found: _Limit | None = None
                setting = keyword(call, "task_time_limit")
                if setting is not None:
                    found = self._setting(setting.value, values)
                for argument in call.args:
                    if isinstance(argument, ast.Dict):
                        for key, value in zip(argument.keys, argument.values, strict=True):
                            if key is None:
                                found = _Limit(
                                    unresolved=values.unresolved(argument, "conf.update({**...}) may set it")
                                )
                            elif isinstance(key, ast.Constant) and key.value == "task_time_limit":
                                found = self._setting(value, values)
                    else:
                        found = _Limit(unresolved=values.unresolved(argument, "conf.update(<mapping>) may set it"))
                if _has_double_star(call) and found is None:
                    found = _Limit(unresolved=values.unresolved(call, "conf.update(**...) may set it"))
                return found
        return None

    def _config_from_object(
        self, statement: ast.stmt, app_names: set[str], values: StaticValues, namespace: str | None
    ) -> _Limit | None:
        if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
            return None
        call = statement.value
        func = call.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr == "config_from_object"
            and isinstance(func.value, ast.Name)
            and func.value.id in app_names
            and call.args
        ):
            return None
        namespace = _string_keyword(call, "namespace", values, None) or namespace
        keys = [f"{namespace}_TASK_TIME_LIMIT"] if namespace else ["task_time_limit", "CELERYD_TASK_TIME_LIMIT"]
        source = call.args[0]
        text = values.string(source) if not isinstance(source, (ast.Name, ast.Attribute)) else None
        if isinstance(text, Unresolved):
            return _Limit(unresolved=text)
        if text is None:
            target = values.definition(source)
        elif text == "django.conf:settings":
            target = self._django_settings(values, source)
        else:
            target = values.lookup(text.replace(":", "."), source)
        if isinstance(target, Unresolved):
            return _Limit(unresolved=target)
        for key in keys:
            found = (
                target.values.member(target, key, source)
                if isinstance(target.node, (ast.Module, ast.ClassDef))
                else None
            )
            if found is None:
                return _Limit(unresolved=values.unresolved(source, "the configuration object cannot be read"))
            if isinstance(found, Located) and isinstance(found.node, ast.expr):
                return self._limit(found.node, None, key, found.values)
            if (
                isinstance(found, Unresolved)
                and " defines no " not in found.reason
                and " has no attribute " not in found.reason
            ):
                return _Limit(unresolved=found)
        return _UNSET

    def _django_settings(self, values: StaticValues, node: ast.AST) -> Located | Unresolved:
        """The settings module `os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)` names in the app's module."""
        for statement in _top_level(values.module.tree.body):
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                call = statement.value
                if (
                    values.dotted(call.func) == "os.environ.setdefault"
                    and len(call.args) == 2
                    and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value == "DJANGO_SETTINGS_MODULE"
                ):
                    module = values.string(call.args[1])
                    if isinstance(module, Unresolved):
                        return module
                    return values.lookup(module, call)
        return values.unresolved(node, "django.conf:settings, but the module sets no DJANGO_SETTINGS_MODULE")

    # -- frameworks with a default limit -------------------------------------------------------

    def _default_or_explicit(
        self,
        framework: str,
        node: ast.expr,
        function: Function | None,
        found: _Limit | None,
        *,
        label: str,
        scale: float = 1.0,
        name: str | None = None,
        queue: str | None = None,
    ) -> None:
        """`found` is the declared limit (None: not declared); without one the framework default applies
        unless strict mode demands an explicit declaration."""
        if found is not None and found.unresolved is not None:
            self._fail(framework, node, function, UNRESOLVED, f"{label} {found.unresolved}", name=name, queue=queue)
        elif found is not None and found.off is not None:
            self._fail(
                framework,
                node,
                function,
                OTHER,
                f"{framework}: {found.off}, which turns the limit off",
                name=name,
                queue=queue,
            )
        elif found is not None and found.seconds is not None:
            self._add(
                framework, node, function, timeout=found.seconds * scale, source=DECORATOR, name=name, queue=queue
            )
        elif self.strict:
            problem = (
                f"strict mode: declare {label} explicitly (the {framework} default is {_number(DEFAULTS[framework])} s)"
            )
            self._fail(framework, node, function, OTHER, problem, name=name, queue=queue)
        else:
            self._add(framework, node, function, timeout=DEFAULTS[framework], source=DEFAULT, name=name, queue=queue)

    def _dramatiq(self, decorator: ast.expr, call: ast.Call | None, function: Function, scope: Scope) -> None:
        found = None
        queue = None
        if call is not None:
            queue = _string_keyword(call, "queue_name", self.values, scope)
            own = keyword(call, "time_limit")
            if own is not None:
                found = self._limit(own.value, scope, "time_limit")
                if found == _UNSET:
                    found = _Limit(off="time_limit=None is no limit")
            elif _has_double_star(call):
                found = _Limit(unresolved=self.values.unresolved(call, "time_limit may come from **kwargs"))
        # Dramatiq's time_limit is in milliseconds.
        self._default_or_explicit("dramatiq", decorator, function, found, label="time_limit", scale=0.001, queue=queue)

    def _rq(self, decorator: ast.expr, call: ast.Call | None, function: Function, scope: Scope) -> None:
        found = None
        queue = _string_argument(call, self.values, scope) if call is not None else None
        if call is not None:
            own = keyword(call, "timeout") or keyword(call, "job_timeout")
            expression = own.value if own is not None else (call.args[2] if len(call.args) > 2 else None)
            if expression is not None:
                found = self._rq_timeout(expression, scope)
            elif _has_double_star(call):
                found = _Limit(unresolved=self.values.unresolved(call, "timeout may come from **kwargs"))
        self._default_or_explicit("rq", decorator, function, found, label="timeout", queue=queue)

    def _rq_timeout(self, expression: ast.expr, scope: Scope) -> _Limit | None:
        text = self.values.string(expression, scope)
        if isinstance(text, str):
            match = _RQ_DURATION.fullmatch(text)
            if match:
                return _Limit(seconds=float(match.group(1)) * _RQ_UNITS[match.group(2).lower()])
        value = self.values.number(expression, scope)
        if isinstance(value, Unresolved):
            return _Limit(unresolved=value)
        if value is None:
            return None  # RQ's default applies
        if value == -1:
            return _Limit(off="timeout=-1 (no limit)")
        return self._limit(expression, scope, "timeout")

    def _arq_settings(self, cls: ast.ClassDef, scope: Scope) -> None:
        """`class WorkerSettings: functions = [...]; job_timeout = ...` in a module that imports arq."""
        lists: list[ast.expr] = []
        fallback: _Limit | None = None
        for statement in cls.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name) and target.id in ("functions", "cron_jobs"):
                    lists.append(statement.value)
                elif isinstance(target, ast.Name) and target.id == "job_timeout":
                    fallback = self._limit(statement.value, scope, "job_timeout")
                    if fallback == _UNSET:
                        fallback = _Limit(off="job_timeout=None is no limit")
        if not lists or not self._imports("arq"):
            return
        for functions in lists:
            if not isinstance(functions, (ast.List, ast.Tuple)):
                self._fail("arq", functions, None, UNRESOLVED, f"{cls.name}: the job list is not a literal list")
                continue
            for element in functions.elts:
                if isinstance(element, ast.Call) and self.values.dotted(element.func, scope) in ARQ_FUNCS:
                    self._arq_function(element, element, scope, fallback)
                else:
                    self._arq_function(None, element, scope, fallback)

    def _arq_function(self, call: ast.Call | None, node: ast.expr, scope: Scope, fallback: _Limit | None) -> None:
        if call is not None:
            self.seen_calls.add(id(call))
        target = call.args[0] if call is not None and call.args else node
        function = self._function(target, scope)
        found = None
        if call is not None:
            own = keyword(call, "timeout")
            if own is not None:
                found = self._limit(own.value, scope, "timeout")
                found = None if found == _UNSET else found
        if found is None and fallback is not None:
            if fallback.seconds is None:
                found = fallback
            else:
                self._add("arq", node, function, timeout=fallback.seconds, source=WORKER, queue=None)
                return
        name = _string_keyword(call, "name", self.values, scope) if call is not None else None
        self._default_or_explicit(
            "arq", node, function, found, label="timeout", name=name or (function.name if function else None)
        )

    def _saq_functions(self, functions: ast.expr, scope: Scope) -> None:
        if not isinstance(functions, (ast.List, ast.Tuple)):
            self._fail("saq", functions, None, UNRESOLVED, "the SAQ functions setting is not a literal list")
            return
        for element in functions.elts:
            target = element.elts[1] if isinstance(element, ast.Tuple) and len(element.elts) == 2 else element
            # SAQ sets a job's timeout where it is enqueued; the declaration can only rely on the default.
            self._default_or_explicit("saq", element, self._function(target, scope), None, label="timeout")

    def _saq_cron(self, call: ast.Call, scope: Scope) -> None:
        self.seen_calls.add(id(call))
        own = keyword(call, "timeout")
        found = self._limit(own.value, scope, "timeout") if own is not None else None
        function = self._function(call.args[0], scope) if call.args else None
        self._default_or_explicit("saq", call, function, None if found == _UNSET else found, label="timeout")

    def _function(self, node: ast.expr, scope: Scope) -> Function | None:
        located = self.values.definition(node, scope)
        # Only a function of this module: the CRL210 rule reads the body of what this file declares.
        if (
            isinstance(located, Located)
            and located.values is self.values
            and isinstance(located.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ):
            return located.node
        return None

    # -- frameworks without a hard limit --------------------------------------------------------

    def _taskiq(self, decorator: ast.expr, call: ast.Call | None, function: Function, scope: Scope) -> None:
        own = keyword(call, "timeout") if call is not None else None
        name = (_string_argument(call, self.values, scope) if call is not None else None) or function.name
        limit = self._limit(own.value, scope, "timeout") if own is not None else _UNSET
        if limit.unresolved is not None:
            self._fail("taskiq", decorator, function, UNRESOLVED, f"timeout {limit.unresolved}", name=name)
        elif limit.seconds is None:
            why = limit.off or "taskiq has no default time limit"
            self._fail("taskiq", decorator, function, OTHER, f"task {name}: {why}; give it timeout=...", name=name)
        elif not isinstance(function, ast.AsyncFunctionDef):
            problem = f"task {name}: taskiq cannot interrupt a sync task, so timeout= is no hard limit; make it async"
            self._fail("taskiq", decorator, function, OTHER, problem, name=name)
        else:
            self._add("taskiq", decorator, function, timeout=limit.seconds, source=DECORATOR, queue=None, name=name)

    def _body_only(self, framework: str, decorator: ast.expr, function: Function) -> None:
        limit = self._body_timeout(function)
        if limit.seconds is not None:
            self._add(framework, decorator, function, timeout=limit.seconds, source=BODY, queue=None)
        elif limit.unresolved is not None:
            self._fail(framework, decorator, function, UNRESOLVED, f"the body's timeout {limit.unresolved}")
        else:
            problem = (
                f"{framework} has no hard timeout: run the whole body of {function.name} inside "
                f"`async with asyncio.timeout(N)` or `return await asyncio.wait_for(..., N)`"
            )
            self._fail(framework, decorator, function, OTHER, problem)

    def _body_timeout(self, function: Function) -> _Limit:
        if not isinstance(function, ast.AsyncFunctionDef):
            return _UNSET
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if len(body) != 1:
            return _UNSET
        scope = self.names.scope_of(function)
        (statement,) = body
        if isinstance(statement, ast.AsyncWith) and len(statement.items) == 1:
            context = statement.items[0].context_expr
            if isinstance(context, ast.Call) and self.values.dotted(context.func, scope) in ASYNC_TIMEOUTS:
                delay = context.args[0] if context.args else getattr(keyword(context, "delay"), "value", None)
                if delay is not None:
                    return self._limit(delay, scope, "timeout")
        if isinstance(statement, (ast.Return, ast.Expr)) and isinstance(statement.value, ast.Await):
            awaited = statement.value.value
            if isinstance(awaited, ast.Call) and self.values.dotted(awaited.func, scope) in WAIT_FOR:
                delay = (
                    awaited.args[1] if len(awaited.args) > 1 else getattr(keyword(awaited, "timeout"), "value", None)
                )
                if delay is not None:
                    return self._limit(delay, scope, "timeout")
        return _UNSET


def _is_conf(node: ast.expr, app_names: set[str]) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "conf"
        and isinstance(node.value, ast.Name)
        and node.value.id in app_names
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in order, including those inside top-level `if`/`try` blocks."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If):
            yield from _top_level(statement.body)
            yield from _top_level(statement.orelse)
        elif isinstance(statement, ast.Try):
            yield from _top_level(statement.body)
            yield from _top_level(statement.orelse)
            yield from _top_level(statement.finalbody)


def _string_keyword(call: ast.Call | None, name: str, values: StaticValues, scope: Scope | None) -> str | None:
    found = keyword(call, name) if call is not None else None
    if found is None:
        return None
    text = values.string(found.value, scope)
    return text if isinstance(text, str) else None


def _is_type_checking(statement: ast.If, values: StaticValues, scope: Scope) -> bool:
    from corral.gates.analysis.names import is_type_checking_test

    return is_type_checking_test(statement.test, values.module.names, scope)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
