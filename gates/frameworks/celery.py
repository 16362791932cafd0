"""Celery as a CRL2 framework: `@app.task` / `@shared_task` / `@current_app.task` and their `time_limit`.

The limit comes from the decorator, its `base=` class, the app's `task_cls`, or the app's configuration
(constructor keywords, `app.conf.X = ...`, `app.conf.update(...)`, `config_from_object(...)` including
Django settings with a namespace). A `@shared_task` binds to whichever app runs it, so every Celery app
of the project must give a limit. `soft_time_limit` is no hard limit; 0 or None turns the limit off.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Located, StaticValues, Unresolved
from corral.gates.frameworks.base import (
    DECORATOR,
    UNRESOLVED,
    UNSET,
    Decoration,
    Framework,
    Limit,
    Words,
    has_double_star,
    keyword,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder

APPS = frozenset({"celery.Celery", "celery.app.Celery", "celery.app.base.Celery"})
SHARED = frozenset({"celery.shared_task", "celery.app.shared_task", "celery.current_app.task"})
TASK_CLASSES = frozenset({"celery.Task", "celery.app.task.Task", "celery.task.Task"})
# Where a task's limit comes from when not from its decorator.
BASE_CLASS, APP_CONFIG = "base class", "app config"


class Celery(Framework):
    name = "celery"
    code = "CRL202"
    summary = "a Celery task without a hard time_limit (decorator, base class or app configuration)"
    words = Words(packages=(b"celery",), declaring=(b"task",), methods=("task",))
    no_limit_arguments = "(time_limit=0)"
    fix_keyword = "time_limit"
    decorators = SHARED

    VALID = (
        """
        from datetime import timedelta
        from celery import shared_task
        LIMIT = timedelta(minutes=2)
        @shared_task(time_limit=LIMIT.total_seconds())
        def send(order_id): ...
        """,
    )
    INVALID = (
        """
        from celery import Celery
        app = Celery("proj")
        @app.task(soft_time_limit=30)  # error: 2 CRL202 "task resize has no time_limit"
        def resize(image_id): ...
        """,
    )

    def owns_method(self, made: str, attribute: str) -> bool:
        return made in APPS and attribute == "task"

    def decorated(self, finder: Finder, site: Decoration) -> None:
        decorator, call, function, scope, app = site
        values = finder.values
        name = (string_keyword(call, "name", values, scope) if call is not None else None) or function.name
        queue = string_keyword(call, "queue", values, scope) if call is not None else None
        if call is not None and has_double_star(call) and keyword(call, "time_limit") is None:
            problem = f"task {name}: time_limit may come from **kwargs, which the gate cannot read"
            finder.fail(self, decorator, function, UNRESOLVED, problem, name=name, queue=queue)
            return
        steps: list[tuple[str, Limit]] = []
        own = keyword(call, "time_limit") if call is not None else None
        if own is not None:
            steps.append((DECORATOR, finder.limit(own.value, scope, "time_limit")))
        base = keyword(call, "base") if call is not None else None
        if base is not None:
            steps.append((BASE_CLASS, self._class_limit(finder, base.value, scope, values)))
        for source, limit in steps:
            if limit.unresolved is not None:
                problem = f"time_limit {limit.unresolved}"
                finder.fail(self, decorator, function, UNRESOLVED, problem, name=name, queue=queue)
                return
            if limit.off is not None:
                finder.fail(self, decorator, function, self.code, f"task {name}: {limit.off}", name=name, queue=queue)
                return
            if limit.seconds is not None:
                finder.add(self, decorator, function, timeout=limit.seconds, source=source, name=name, queue=queue)
                return
        apps = [app] if app is not None else finder.memo("celery apps", lambda: _project_apps(finder.values))
        if not apps:
            problem = f"task {name} has no time_limit and no Celery app of the project sets task_time_limit"
            finder.fail(self, decorator, function, self.code, problem, name=name, queue=queue)
            return
        seconds: list[float] = []
        sources: set[str] = set()
        for each in apps:
            source, limit = self._app_limit(finder, each)
            where = each.values.where(each.node)
            if limit.unresolved is not None:
                problem = f"task {name}: the app's task_time_limit {limit.unresolved}"
                finder.fail(self, decorator, function, UNRESOLVED, problem, name=name, queue=queue)
                return
            if limit.seconds is None:
                why = limit.off or "sets no task_time_limit"
                problem = (
                    f"task {name} has no time_limit and the Celery app at {where} {why}; soft_time_limit does not count"
                )
                finder.fail(self, decorator, function, self.code, problem, name=name, queue=queue)
                return
            seconds.append(limit.seconds)
            sources.add(source)
        source = sources.pop() if len(sources) == 1 else APP_CONFIG
        finder.add(self, decorator, function, timeout=min(seconds), source=source, name=name, queue=queue)

    def _class_limit(self, finder: Finder, expression: ast.expr, scope: Scope | None, values: StaticValues) -> Limit:
        located = values.definition(expression, scope)
        if isinstance(located, Unresolved):
            return Limit(unresolved=located)
        if isinstance(located.node, ast.expr):
            # task_cls="proj.tasks:MyTask": a class named by a string.
            text = located.values.string(located.node)
            if isinstance(text, Unresolved):
                return Limit(unresolved=text)
            located = finder.values.lookup(text.replace(":", "."), expression)
            if isinstance(located, Unresolved):
                return Limit(unresolved=located)
        if not isinstance(located.node, ast.ClassDef):
            return Limit(unresolved=values.unresolved(expression, f"{ast.unparse(expression)} is not a class"))
        found = located.values.class_attribute(located, "time_limit", TASK_CLASSES)
        if found is None:
            return UNSET
        if isinstance(found, Unresolved):
            return Limit(unresolved=found)
        if not isinstance(found.node, ast.expr):
            return Limit(unresolved=found.values.unresolved(found.node, "time_limit is not a value"))
        return finder.limit(found.node, None, "time_limit", found.values)

    def _app_limit(self, finder: Finder, app: Located) -> tuple[str, Limit]:
        """The task time limit an app gives tasks without one: its task_cls, then its configuration."""
        assert isinstance(app.node, ast.Call)
        values = app.values
        task_cls = keyword(app.node, "task_cls")
        if task_cls is not None:
            limit = self._class_limit(finder, task_cls.value, None, values)
            if limit != UNSET:
                return BASE_CLASS, limit
        app_names = {name for name, bindings in values.module.bindings.items() if any(b is app.node for b in bindings)}
        direct: Limit = UNSET
        namespace = string_keyword(app.node, "namespace", values, None)
        setting = keyword(app.node, "task_time_limit")
        if setting is not None:
            direct = _setting(finder, setting.value, values)
        elif has_double_star(app.node):
            direct = Limit(unresolved=values.unresolved(app.node, "Celery(**...) may set task_time_limit"))
        from_object: Limit = UNSET
        for statement in _top_level(values.module.tree.body):
            found = _conf_statement(finder, statement, app_names, values)
            if found is not None:
                direct = found
            loaded = _config_from_object(finder, statement, app_names, values, namespace)
            if loaded is not None:
                from_object = loaded
        # Changes made on the app (constructor keywords, conf.X = ..., conf.update) take precedence over
        # the configuration object, as in Celery.
        return APP_CONFIG, direct if direct != UNSET else from_object


def _project_apps(values: StaticValues) -> list[Located]:
    """Every `X = Celery(...)` of the project (a shared task runs under whichever app imports it)."""
    apps: list[Located] = []
    modules = [values.module]
    for relpath in values.project.files_containing(b"Celery("):
        if relpath != values.module.relpath:
            module = values.project.file(relpath)
            if module is not None:
                modules.append(module)
    for module in modules:
        module_values = values.for_module(module)
        for bindings in module.bindings.values():
            for binding in bindings:
                if isinstance(binding, ast.Call) and module_values.dotted(binding.func) in APPS:
                    apps.append(Located(binding, module_values))
    return apps


def _setting(finder: Finder, expression: ast.expr, values: StaticValues) -> Limit:
    """A task_time_limit set on the app itself: None there overrides any configuration object."""
    limit = finder.limit(expression, None, "task_time_limit", values)
    return Limit(off="sets task_time_limit=None") if limit == UNSET else limit


def _conf_statement(finder: Finder, statement: ast.stmt, app_names: set[str], values: StaticValues) -> Limit | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Attribute) and target.attr == "task_time_limit" and _is_conf(target.value, app_names):
            return _setting(finder, statement.value, values)
        if (
            isinstance(target, ast.Subscript)
            and _is_conf(target.value, app_names)
            and isinstance(target.slice, ast.Constant)
            and target.slice.value == "task_time_limit"
        ):
            return _setting(finder, statement.value, values)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update" and _is_conf(call.func.value, app_names):
            found: Limit | None = None
            setting = keyword(call, "task_time_limit")
            if setting is not None:
                found = _setting(finder, setting.value, values)
            for argument in call.args:
                if isinstance(argument, ast.Dict):
                    for key, value in zip(argument.keys, argument.values, strict=True):
                        if key is None:
                            found = Limit(unresolved=values.unresolved(argument, "conf.update({**...}) may set it"))
                        elif isinstance(key, ast.Constant) and key.value == "task_time_limit":
                            found = _setting(finder, value, values)
                else:
                    found = Limit(unresolved=values.unresolved(argument, "conf.update(<mapping>) may set it"))
            if has_double_star(call) and found is None:
                found = Limit(unresolved=values.unresolved(call, "conf.update(**...) may set it"))
            return found
    return None


def _config_from_object(
    finder: Finder, statement: ast.stmt, app_names: set[str], values: StaticValues, namespace: str | None
) -> Limit | None:
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
    namespace = string_keyword(call, "namespace", values, None) or namespace
    keys = [f"{namespace}_TASK_TIME_LIMIT"] if namespace else ["task_time_limit", "CELERYD_TASK_TIME_LIMIT"]
    source = call.args[0]
    text = values.string(source) if not isinstance(source, (ast.Name, ast.Attribute)) else None
    if isinstance(text, Unresolved):
        return Limit(unresolved=text)
    if text is None:
        target = values.definition(source)
    elif text == "django.conf:settings":
        target = _django_settings(values, source)
    else:
        target = values.lookup(text.replace(":", "."), source)
    if isinstance(target, Unresolved):
        return Limit(unresolved=target)
    for key in keys:
        found = (
            target.values.member(target, key, source) if isinstance(target.node, (ast.Module, ast.ClassDef)) else None
        )
        if found is None:
            return Limit(unresolved=values.unresolved(source, "the configuration object cannot be read"))
        if isinstance(found, Located) and isinstance(found.node, ast.expr):
            return finder.limit(found.node, None, key, found.values)
        if (
            isinstance(found, Unresolved)
            and " defines no " not in found.reason
            and " has no attribute " not in found.reason
        ):
            return Limit(unresolved=found)
    return UNSET


def _django_settings(values: StaticValues, node: ast.AST) -> Located | Unresolved:
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


FRAMEWORK = Celery()


# -- what the connection budget (CRL3, `rules.connection_budget`) reads of Celery's workers ------------

WORKER_PROGRAM = "celery"  # `celery -A app worker ...`, also `python -m celery`
WORKERS = "Celery workers"
# Module-level settings of a worker's concurrency: Django's (the app configured with namespace="CELERY"),
# the app's `conf`, and a `celeryconfig` module's own.
DJANGO_CONCURRENCY = "CELERY_WORKER_CONCURRENCY"
CONCURRENCY = "worker_concurrency"
CONFIG_MODULE = "celeryconfig"
DEFAULT_CONCURRENCY = "Celery's default is the host's CPU count"


def worker_concurrency(arguments: tuple[str, ...]) -> int | str | None:
    """The concurrency `celery worker` runs with from its arguments (`-c N`, `--concurrency N`,
    `--concurrency=N`; `--pool solo` runs one task at a time): None when they do not set it, or why it
    cannot be read."""
    concurrency: str | None = None
    pool: str | None = None
    for index, argument in enumerate(arguments):
        following = arguments[index + 1] if index + 1 < len(arguments) else ""
        if argument in ("-c", "--concurrency"):
            concurrency = following
        elif argument.startswith("--concurrency="):
            concurrency = argument.partition("=")[2]
        elif argument.startswith("-c") and argument[2:].isdigit():
            concurrency = argument[2:]
        elif argument in ("-P", "--pool"):
            pool = following
        elif argument.startswith("--pool="):
            pool = argument.partition("=")[2]
    if concurrency is None:
        return 1 if pool == "solo" else None
    if concurrency.isascii() and concurrency.isdigit() and len(concurrency) <= 18 and int(concurrency) >= 1:
        return int(concurrency)
    if "$" in concurrency:
        return f"--concurrency {concurrency!r}, filled in at deploy time (a substitution the gate cannot read)"
    return f"--concurrency {concurrency!r}, not a whole number >= 1"
