"""Celery as a CRL2 framework: `@app.task` / `@shared_task` / `@current_app.task` and their `time_limit`.

The limit comes from the decorator, its `base=` class, the app's `task_cls`, or the app's configuration
(constructor keywords, `app.conf.X = ...`, `app.conf.update(...)`, `config_from_object(...)` including
Django settings with a namespace). A `@shared_task` binds to whichever app runs it, so every Celery app
of the project must give a limit. `soft_time_limit` is no hard limit; 0 or None turns the limit off.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import (
    Located,
    StaticValues,
    Unresolved,
    assigned_in_body,
    sets_django_settings_module,
)
from corral.gates.frameworks.base import (
    CALLED,
    DECORATOR,
    UNRESOLVED,
    UNSET,
    Decoration,
    EnqueuePlant,
    Framework,
    Function,
    Limit,
    Words,
    has_double_star,
    keyword,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder, Made, Receivers, local_names_of, returned_call
from corral.gates.knowledge.network_reach import JobEnqueue

# The settings read, and their names before Celery 4 (the names a configuration object may still use).
TASK_TIME_LIMIT, ANNOTATIONS_SETTING, TIME_LIMIT = "task_time_limit", "task_annotations", "time_limit"
OLD_NAMES = {TASK_TIME_LIMIT: "CELERYD_TASK_TIME_LIMIT", ANNOTATIONS_SETTING: "CELERY_ANNOTATIONS"}
# How many base classes a task class's time_limit is looked up through.
_CLASSES_AT_MOST = 16
APPS = frozenset({"celery.Celery", "celery.app.Celery", "celery.app.base.Celery"})
SHARED = frozenset({"celery.shared_task", "celery.app.shared_task", "celery.current_app.task"})
TASK_CLASSES = frozenset({"celery.Task", "celery.app.task.Task", "celery.task.Task"})
# What enqueues a task (CRL402): its methods, each with the form Celery 5.4 added that waits for Django's commit
# (celery/contrib/django/task.py, DjangoTask: `delay_on_commit`, `apply_async_on_commit`); an app's `send_task`;
# and the canvas: a signature of a task (`task.s(...)`, `.si(...)`, `.signature(...)`) or one of Celery's
# canvas calls, applied with `delay()` / `apply_async()`. Calling a group, chain or chord applies it too
# (`Signature.__call__` runs the task here, so a plain signature's call is not an enqueue).
TASK_ENQUEUES = {"delay": "delay_on_commit", "apply_async": "apply_async_on_commit"}
ON_COMMIT_ENQUEUES = frozenset(TASK_ENQUEUES.values())
SEND_TASK = "send_task"
SIGNATURE_METHODS = frozenset({"s", "si", "signature"})
_CANVAS_MODULES = ("celery", "celery.canvas")
APPLIED_WHEN_CALLED = frozenset(
    f"{module}.{name}" for module in _CANVAS_MODULES for name in ("group", "chain", "chord")
)
CANVAS = APPLIED_WHEN_CALLED | frozenset(f"{module}.signature" for module in _CANVAS_MODULES)
CURRENT_APP = frozenset({"celery.current_app"})
# Where a task's limit comes from when not from its decorator.
BASE_CLASS, APP_CONFIG, ANNOTATIONS = "base class", "app config", "task annotations"


class Celery(Framework):
    name = "celery"
    # Calling a task runs its body in the calling process ("When called tasks apply the run() method",
    # https://docs.celeryq.dev/en/2.2-archived/reference/celery.task.html; `Task.__call__`): `call_enqueues` stays
    # False and the network rules follow the call; `.delay()` / `.apply_async()` are the enqueues.
    code = "CRL202"
    summary = "a Celery task without a hard time_limit (decorator, base class or app configuration)"
    words = Words(packages=(b"celery",), declaring=(b"task",), methods=("task", "register_task"))
    call_methods = frozenset({"register_task"})
    no_limit_arguments = "(time_limit=0)"
    fix_keyword = "time_limit"
    decorators = SHARED
    enqueue_methods = frozenset({*TASK_ENQUEUES, *ON_COMMIT_ENQUEUES, SEND_TASK, CALLED})
    enqueue_plant = EnqueuePlant("from celery import shared_task as {name}", "(time_limit=1)", "delay")

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

    def owns_call(self, made: str, attribute: str) -> bool:
        return made in APPS and attribute == "register_task"

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        func = call.func
        if method == CALLED:
            assert isinstance(func, ast.Call)
            applied = receivers.dotted(func.func) in APPLIED_WHEN_CALLED
            return JobEnqueue(f"{receivers.shown(func)}()", call) if applied else None
        assert isinstance(func, ast.Attribute)
        receiver, shown = func.value, receivers.shown(func)
        if method == SEND_TASK:
            made = receivers.made(receiver)
            known = receivers.dotted(receiver) in CURRENT_APP or (made is not None and made.maker in APPS)
            return JobEnqueue(shown, call) if known else None
        if method in ON_COMMIT_ENQUEUES:
            # `on_commit(partial(self.delay, ...))` with no `using=`: deferred only by the default database's commit.
            deferred = receivers.task_method(call, self)
            return deferred._replace(after_default_commit=True) if deferred is not None else None
        task = receivers.task_method(call, self, on_commit=TASK_ENQUEUES[method])
        if task is not None:
            return task
        value = receivers.value(receiver)
        if not isinstance(value, ast.Call):
            return None
        signed = value.func
        if receivers.dotted(signed) in CANVAS or (
            isinstance(signed, ast.Attribute)
            and signed.attr in SIGNATURE_METHODS
            and receivers.declares(receivers.value(signed.value), self)
        ):
            return JobEnqueue(shown, call)
        return None

    def decorated(self, finder: Finder, site: Decoration) -> None:
        decorator, call, function, scope = site.node, site.call, site.function, site.scope
        values = finder.values
        given = string_keyword(call, "name", values, scope)
        name = given or function.name
        named = given is not None or call is None or keyword(call, "name") is None
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
        # Celery names a task `<module>.<function>` unless it is given a name (celery/app/base.py, gen_task_name).
        qualified = (given or f"{values.module.names.module}.{function.name}") if named else None
        task = _Task(decorator, function, name, qualified, queue)
        apps = [_App(site.owner, site.factories)] if site.owner is not None else self._project_apps(finder)
        self._declare(finder, task, next((step for step in steps if step[1] != UNSET), None), apps)

    def method_called(self, finder: Finder, call: ast.Call, scope: Scope, made: Made) -> None:
        """`app.register_task(T())`: a class-based task, limited by its class's `time_limit` or the app's."""
        if len(call.args) != 1:
            return
        argument = call.args[0]
        expression = argument.func if isinstance(argument, ast.Call) and not argument.args else argument
        located = finder.values.definition(expression, scope)
        shown_class = ast.unparse(expression)
        if isinstance(located, Unresolved) or not isinstance(located.node, ast.ClassDef):
            problem = f"app.register_task({ast.unparse(argument)}): the task class cannot be read"
            finder.fail(self, call, None, UNRESOLVED, problem, name=shown_class)
            return
        cls, class_values = located.node, located.values
        given = self._class_member(finder, located, "name", 0)
        if given is None:
            qualified: str | None = f"{class_values.module.names.module}.{cls.name}"
        elif isinstance(given, Located) and isinstance(given.node, ast.expr):
            text = given.values.string(given.node)
            qualified = text if isinstance(text, str) else None
        else:
            qualified = None
        run = next((item for item in cls.body if isinstance(item, Function) and item.name == "run"), None)
        function = run if class_values is finder.values else None
        task = _Task(call, function, qualified or cls.name, qualified, None)
        own = self._class_limit(finder, expression, scope, finder.values)
        self._declare(finder, task, (BASE_CLASS, own) if own != UNSET else None, [_App(made.owner, made.factories)])

    def _project_apps(self, finder: Finder) -> list[_App]:
        return finder.memo("celery apps", lambda: _project_apps(finder.values))

    def _declare(self, finder: Finder, task: _Task, own: tuple[str, Limit] | None, apps: list[_App]) -> None:
        """Report `task`, whose own limit (decorator or class) is `own`, under each app it may run in: an app's
        task_annotations override the task's own limit (celery/app/task.py, Task.annotate sets them on the
        class), which overrides the app's task_time_limit."""
        name, node, function, queue = task.name, task.node, task.function, task.queue
        outcomes: list[tuple[str, Limit, _App | None, bool]] = []
        for app in apps:
            annotated = self._annotated(finder, app, task)
            unannotated = (*own, None, False) if own is not None else (*self._app_limit(finder, app), app, False)
            if annotated is not None and (annotated.unresolved is None or unannotated[1].unresolved is None):
                outcomes.append((ANNOTATIONS, annotated, app, True))
            else:
                # Unreadable annotations over an unreadable limit: the limit's reason is reported (one is enough).
                outcomes.append(unannotated)
        if not apps and own is not None:
            outcomes.append((*own, None, False))
        if not outcomes:
            problem = f"task {name} has no time_limit and no Celery app of the project sets task_time_limit"
            finder.fail(self, node, function, self.code, problem, name=name, queue=queue)
            return
        seconds: list[float] = []
        sources: set[str] = set()
        for source, limit, under, annotates in outcomes:
            where = under.located.values.where(under.located.node) if under is not None else ""
            if limit.unresolved is not None:
                if annotates:
                    problem = f"task {name}: the task_annotations of the Celery app at {where}: {limit.unresolved}"
                elif under is None:
                    problem = f"time_limit {limit.unresolved}"
                else:
                    problem = f"task {name}: the app's task_time_limit {limit.unresolved}"
                finder.fail(self, node, function, UNRESOLVED, problem, name=name, queue=queue)
                return
            if limit.seconds is None:
                if annotates:
                    problem = (
                        f"task {name}: {limit.off} (task_annotations of the Celery app at {where}, "
                        f"which override the task's own time_limit)"
                    )
                elif under is None:
                    problem = f"task {name}: {limit.off}"
                else:
                    why = limit.off or "sets no task_time_limit"
                    problem = (
                        f"task {name} has no time_limit and the Celery app at {where} {why}; "
                        f"soft_time_limit does not count"
                    )
                finder.fail(self, node, function, self.code, problem, name=name, queue=queue)
                return
            seconds.append(limit.seconds)
            sources.add(source)
        source = sources.pop() if len(sources) == 1 else APP_CONFIG
        finder.add(self, node, function, timeout=min(seconds), source=source, name=name, queue=queue)

    def _annotated(self, finder: Finder, app: _App, task: _Task) -> Limit | None:
        """The time_limit the app's task_annotations give `task` (None: they give it none)."""
        found = finder.memo(f"celery annotations {id(app.located.node)}", lambda: _annotations(app))
        if found is None:
            return None
        expression, values = found
        if isinstance(expression, Unresolved):
            return Limit(unresolved=expression)
        return _annotation_limit(finder, expression, values, task.qualified)

    def _class_limit(self, finder: Finder, expression: ast.expr, scope: Scope | None, values: StaticValues) -> Limit:
        located = self._named_class(finder, expression, values, scope)
        if isinstance(located, Unresolved):
            return Limit(unresolved=located)
        if not isinstance(located.node, ast.ClassDef):
            return Limit(unresolved=values.unresolved(expression, f"{ast.unparse(expression)} is not a class"))
        return self._class_time_limit(finder, located, 0)

    def _named_class(
        self, finder: Finder, expression: ast.expr, values: StaticValues, scope: Scope | None = None
    ) -> Located | Unresolved:
        """What a class expression stands for; also `task_cls="proj.tasks:MyTask"`, a class named by a string."""
        located = values.definition(expression, scope)
        if isinstance(located, Located) and isinstance(located.node, ast.expr):
            text = located.values.string(located.node)
            if isinstance(text, Unresolved):
                return text
            return finder.values.lookup(text.replace(":", "."), expression)
        return located

    def _class_time_limit(self, finder: Finder, located: Located, depth: int) -> Limit:
        """A task class's `time_limit` (see `_class_member`)."""
        found = self._class_member(finder, located, TIME_LIMIT, depth)
        if found is None:
            return UNSET
        if isinstance(found, Unresolved):
            return Limit(unresolved=found)
        assert isinstance(found.node, ast.expr)
        return finder.limit(found.node, None, TIME_LIMIT, found.values)

    def _class_member(
        self, finder: Finder, located: Located, attribute: str, depth: int
    ) -> Located | Unresolved | None:
        """A task class's `attribute`, through its bases (None: none sets it): `app.Task` (the app's task
        class) is the app's `task_cls`, and `celery.Task` sets nothing the gate reads."""
        cls, values = located.node, located.values
        assert isinstance(cls, ast.ClassDef)
        if depth > _CLASSES_AT_MOST:
            return values.unresolved(cls, "too many base classes (a cycle?)")
        own = assigned_in_body(cls, attribute)
        if own is not None:
            return Located(own, values)
        for base in cls.bases:
            dotted = values.dotted(base)
            if dotted in TASK_CLASSES or dotted == "builtins.object":
                continue
            inner: Located | Unresolved
            if isinstance(base, ast.Attribute) and base.attr == "Task":
                made = finder.made(base.value, None, values)
                if made is not None and made.maker in APPS:
                    assert isinstance(made.owner.node, ast.Call)
                    task_cls = keyword(made.owner.node, "task_cls")
                    if task_cls is None:
                        continue
                    inner = self._named_class(finder, task_cls.value, made.owner.values)
                else:
                    inner = values.definition(base)
            else:
                inner = values.definition(base)
            if isinstance(inner, Unresolved):
                return inner
            if not isinstance(inner.node, ast.ClassDef):
                return values.unresolved(base, f"base class {ast.unparse(base)} cannot be read")
            found = self._class_member(finder, inner, attribute, depth + 1)
            if found is not None:
                return found
        return None

    def _app_limit(self, finder: Finder, app: _App) -> tuple[str, Limit]:
        """The task time limit an app gives tasks without one: its task_cls, then its configuration."""
        assert isinstance(app.located.node, ast.Call)
        values = app.located.values
        constructed = app.located.node
        task_cls = keyword(constructed, "task_cls")
        if task_cls is not None:
            limit = self._class_limit(finder, task_cls.value, None, values)
            if limit != UNSET:
                return BASE_CLASS, limit
        direct: Limit = UNSET
        namespace = string_keyword(constructed, "namespace", values, None)
        setting = keyword(constructed, "task_time_limit")
        if setting is not None:
            direct = _setting(finder, setting.value, values)
        elif has_double_star(constructed):
            direct = Limit(unresolved=values.unresolved(constructed, "Celery(**...) may set task_time_limit"))
        from_object: Limit = UNSET
        for statement, app_names, statement_values in _configuring(app):
            found = _conf_statement(finder, statement, app_names, statement_values)
            if found is not None:
                direct = found
            loaded = _config_from_object(finder, statement, app_names, statement_values, namespace)
            if loaded is not None:
                from_object = loaded
        # Changes made on the app (constructor keywords, conf.X = ..., conf.update) take precedence over
        # the configuration object, as in Celery.
        return APP_CONFIG, direct if direct != UNSET else from_object


class _Task(NamedTuple):
    """A declared task: where it is reported, its function, the name it is shown by, the name Celery
    registers it under (None when the gate cannot read it) and its queue."""

    node: ast.expr
    function: Function | None
    name: str
    qualified: str | None
    queue: str | None


class _App(NamedTuple):
    """A Celery app: its `Celery(...)` call and the calls of the project factories that returned it."""

    located: Located
    factories: tuple[Located, ...] = ()


def _configuring(app: _App) -> Iterator[tuple[ast.stmt, set[str], StaticValues]]:
    """The statements that may configure `app`, in the order they run, with the names the app has there: the
    module level of the module that makes it, the body of the factory function that returns it, then the
    module level of each module that calls a factory for it (innermost first)."""
    call, values = app.located.node, app.located.values
    assert isinstance(call, ast.Call)
    module = values.module
    names = {name for name, bindings in module.bindings.items() if any(binding is call for binding in bindings)}
    yield from ((statement, names, values) for statement in _top_level(module.tree.body))
    for statement in module.tree.body:
        if isinstance(statement, ast.FunctionDef) and returned_call(statement) is call:
            local = local_names_of(statement, call)
            yield from ((inner, local, values) for inner in _top_level(statement.body))
    for factory in reversed(app.factories):
        factory_module = factory.values.module
        bound = {name for name, bindings in factory_module.bindings.items() if any(b is factory.node for b in bindings)}
        yield from ((statement, bound, factory.values) for statement in _top_level(factory_module.tree.body))


def _project_apps(values: StaticValues) -> list[_App]:
    """Every Celery app of the project (a shared task runs under whichever app imports it): each
    `X = Celery(...)`; each `X = make_celery(...)` of a module-level factory function returning a `Celery(...)`
    (configured by the factory and where X is bound), and a factory's app itself when no module binds one."""
    apps: list[_App] = []
    factories: list[tuple[ast.FunctionDef, ast.Call, StaticValues]] = []
    for module_values in _modules_containing(values, b"Celery("):
        for bindings in module_values.module.bindings.values():
            for binding in bindings:
                if isinstance(binding, ast.Call) and module_values.dotted(binding.func) in APPS:
                    apps.append(_App(Located(binding, module_values)))
                elif isinstance(binding, ast.FunctionDef):
                    made = returned_call(binding)
                    if made is not None and module_values.dotted(made.func) in APPS:
                        factories.append((binding, made, module_values))
    for factory, made, factory_values in factories:
        called = [
            _App(Located(made, factory_values), (Located(binding, caller),))
            for caller in _modules_containing(values, factory.name.encode())
            for bindings in caller.module.bindings.values()
            for binding in bindings
            if isinstance(binding, ast.Call) and _calls_function(caller, binding, factory)
        ]
        apps.extend(called or [_App(Located(made, factory_values))])
    return apps


def _modules_containing(values: StaticValues, needle: bytes) -> list[StaticValues]:
    """The evaluators of the checked module and of every project module whose bytes hold `needle`."""
    found = [values]
    for relpath in values.project.files_containing(needle):
        if relpath != values.module.relpath:
            module = values.project.file(relpath)
            if module is not None:
                found.append(values.for_module(module))
    return found


def _calls_function(values: StaticValues, call: ast.Call, function: ast.FunctionDef) -> bool:
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return False
    located = values.definition(call.func)
    return isinstance(located, Located) and located.node is function


def _annotations(app: _App) -> tuple[ast.expr | Unresolved, StaticValues] | None:
    """The task_annotations the app is given last (None: none), as the expression that gives them."""
    call, values = app.located.node, app.located.values
    assert isinstance(call, ast.Call)
    found: tuple[ast.expr | Unresolved, StaticValues] | None = None
    given = keyword(call, ANNOTATIONS_SETTING)
    if given is not None:
        found = given.value, values
    elif has_double_star(call):
        found = values.unresolved(call, "Celery(**...) may set task_annotations"), values
    namespace = string_keyword(call, "namespace", values, None)
    loaded: tuple[ast.expr | Unresolved, StaticValues] | None = None
    for statement, app_names, statement_values in _configuring(app):
        direct = _conf_value(statement, app_names, statement_values, ANNOTATIONS_SETTING)
        # A mapping the gate cannot read (`conf.update(flask_app.config)`) is reported through task_time_limit
        # for the tasks relying on the app's limit; it is not assumed to annotate over a task's own.
        if direct is not None and not isinstance(direct, Unresolved):
            found = direct, statement_values
        loading = _loading_call(statement, app_names)
        target = _config_object(loading, statement_values) if loading is not None else None
        # A configuration object the gate cannot read at all is reported through task_time_limit, for the
        # tasks that rely on the app's; its annotations are not assumed over a task's own time_limit.
        if loading is not None and isinstance(target, Located):
            setting = _object_setting(loading, statement_values, target, namespace, ANNOTATIONS_SETTING)
            if setting is None:
                loaded = None
            elif isinstance(setting, Unresolved):
                loaded = setting, statement_values
            else:
                value = setting[1]
                assert isinstance(value.node, ast.expr)
                loaded = value.node, value.values
    # As for task_time_limit, what is set on the app wins over the configuration object.
    return found if found is not None else loaded


def _annotation_limit(
    finder: Finder, expression: ast.expr, values: StaticValues, qualified: str | None
) -> Limit | None:
    """The time_limit task_annotations give the task Celery registers as `qualified`. Celery applies the
    first annotation naming the task, then the first for "*" (celery/app/annotations.py, `resolve_all`), each
    setting its attributes on the task class: a "*" entry's time_limit wins over the task's own entry."""
    entries = _annotation_maps(expression, values)
    if isinstance(entries, Unresolved):
        return Limit(unresolved=entries)
    specific: tuple[ast.expr, StaticValues] | None = None
    everything: tuple[ast.expr, StaticValues] | None = None
    for mapping, mapping_values in entries:
        for key, value in zip(mapping.keys, mapping.values, strict=True):
            text = mapping_values.string(key) if key is not None else None
            if not isinstance(text, str):
                return Limit(unresolved=mapping_values.unresolved(mapping, "a key of task_annotations cannot be read"))
            if text == "*" and everything is None:
                everything = value, mapping_values
            elif qualified is None and text != "*":
                reason = "the task's name cannot be read to match it against task_annotations"
                return Limit(unresolved=mapping_values.unresolved(mapping, reason))
            elif text == qualified and specific is None:
                specific = value, mapping_values
    result: Limit | None = None
    for entry in (specific, everything):
        if entry is not None:
            attributes = _annotation_attributes(finder, *entry)
            if attributes is not None:
                result = attributes
    return result


def _annotation_maps(expression: ast.expr, values: StaticValues) -> list[tuple[ast.Dict, StaticValues]] | Unresolved:
    """task_annotations as dict literals: one dict, or a list or tuple of them (each may be a constant)."""
    located = _literal(expression, values)
    if isinstance(located, Unresolved):
        return located
    node, node_values = located
    elements = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    maps: list[tuple[ast.Dict, StaticValues]] = []
    for element in elements:
        found = _literal(element, node_values)
        if isinstance(found, Unresolved):
            return found
        if not isinstance(found[0], ast.Dict):
            reason = f"task_annotations {ast.unparse(found[0])} is no dict the gate can read"
            return found[1].unresolved(found[0], reason)
        maps.append((found[0], found[1]))
    return maps


def _annotation_attributes(finder: Finder, expression: ast.expr, values: StaticValues) -> Limit | None:
    """The time_limit one annotation entry sets (None: it sets none)."""
    found = _literal(expression, values)
    if isinstance(found, Unresolved):
        return Limit(unresolved=found)
    node, node_values = found
    if not isinstance(node, ast.Dict):
        return Limit(unresolved=node_values.unresolved(node, f"{ast.unparse(node)} is no dict the gate can read"))
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            return Limit(unresolved=node_values.unresolved(node, "{**...} may set time_limit"))
        if node_values.string(key) == TIME_LIMIT:
            limit = finder.limit(value, None, TIME_LIMIT, node_values)
            return Limit(off="time_limit=None is no limit") if limit == UNSET else limit
    return None


def _literal(expression: ast.expr, values: StaticValues) -> tuple[ast.expr, StaticValues] | Unresolved:
    """The literal a name or attribute stands for (the expression itself when it is no name)."""
    if not isinstance(expression, (ast.Name, ast.Attribute)):
        return expression, values
    located = values.definition(expression)
    if isinstance(located, Unresolved):
        return located
    if not isinstance(located.node, ast.expr):
        return values.unresolved(expression, f"{ast.unparse(expression)} is no literal the gate can read")
    return located.node, located.values


def _setting(finder: Finder, expression: ast.expr, values: StaticValues) -> Limit:
    """A task_time_limit set on the app itself: None there overrides any configuration object."""
    limit = finder.limit(expression, None, "task_time_limit", values)
    return Limit(off="sets task_time_limit=None") if limit == UNSET else limit


def _conf_statement(finder: Finder, statement: ast.stmt, app_names: set[str], values: StaticValues) -> Limit | None:
    found = _conf_value(statement, app_names, values, TASK_TIME_LIMIT)
    if isinstance(found, Unresolved):
        return Limit(unresolved=found)
    return _setting(finder, found, values) if found is not None else None


def _conf_value(
    statement: ast.stmt, app_names: set[str], values: StaticValues, setting: str
) -> ast.expr | Unresolved | None:
    """The value `statement` gives `setting` on the app's conf (`app.conf.X = ...`, `app.conf["X"] = ...`,
    `app.conf.update(...)`); None when it does not touch it."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Attribute) and target.attr == setting and _is_conf(target.value, app_names):
            return statement.value
        if (
            isinstance(target, ast.Subscript)
            and _is_conf(target.value, app_names)
            and isinstance(target.slice, ast.Constant)
            and target.slice.value == setting
        ):
            return statement.value
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update" and _is_conf(call.func.value, app_names):
            found: ast.expr | Unresolved | None = None
            given = keyword(call, setting)
            if given is not None:
                found = given.value
            for argument in call.args:
                literal = _literal(argument, values)
                # A dict constant of this module given by name reads as the dict itself.
                mapping = literal[0] if not isinstance(literal, Unresolved) and literal[1] is values else None
                if isinstance(mapping, ast.Dict):
                    for key, value in zip(mapping.keys, mapping.values, strict=True):
                        if key is None:
                            found = values.unresolved(argument, "conf.update({**...}) may set it")
                        elif isinstance(key, ast.Constant) and key.value == setting:
                            found = value
                else:
                    found = values.unresolved(argument, "conf.update(<mapping>) may set it")
            if has_double_star(call) and found is None:
                found = values.unresolved(call, "conf.update(**...) may set it")
            return found
    return None


def _config_from_object(
    finder: Finder, statement: ast.stmt, app_names: set[str], values: StaticValues, namespace: str | None
) -> Limit | None:
    call = _loading_call(statement, app_names)
    if call is None:
        return None
    found = _config_setting(call, values, namespace, TASK_TIME_LIMIT)
    if found is None:
        return UNSET
    if isinstance(found, Unresolved):
        return Limit(unresolved=found)
    key, located = found
    assert isinstance(located.node, ast.expr)
    return finder.limit(located.node, None, key, located.values)


def _loading_call(statement: ast.stmt, app_names: set[str]) -> ast.Call | None:
    """The `app.config_from_object(...)` call `statement` is, if it is one."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    func = call.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "config_from_object"
        and isinstance(func.value, ast.Name)
        and func.value.id in app_names
        and call.args
    ):
        return call
    return None


def _config_setting(
    call: ast.Call, values: StaticValues, namespace: str | None, setting: str
) -> tuple[str, Located] | Unresolved | None:
    """The key and value a configuration object loaded by `call` gives `setting` (None: it gives none)."""
    target = _config_object(call, values)
    return target if isinstance(target, Unresolved) else _object_setting(call, values, target, namespace, setting)


def _config_object(call: ast.Call, values: StaticValues) -> Located | Unresolved:
    """The module or class `app.config_from_object(...)` loads."""
    source = call.args[0]
    text = values.string(source) if not isinstance(source, (ast.Name, ast.Attribute)) else None
    if isinstance(text, Unresolved):
        return text
    if text is None:
        return values.definition(source)
    if text == "django.conf:settings":
        return _django_settings(values, source)
    return values.lookup(text.replace(":", "."), source)


def _object_setting(
    call: ast.Call, values: StaticValues, target: Located, namespace: str | None, setting: str
) -> tuple[str, Located] | Unresolved | None:
    """The key and value the loaded module or class `target` gives `setting` (None: it gives none)."""
    source = call.args[0]
    namespace = string_keyword(call, "namespace", values, None) or namespace
    keys = [f"{namespace}_{setting.upper()}"] if namespace else [setting, OLD_NAMES[setting]]
    for key in keys:
        found = (
            target.values.member(target, key, source) if isinstance(target.node, (ast.Module, ast.ClassDef)) else None
        )
        if found is None:
            return values.unresolved(source, "the configuration object cannot be read")
        if isinstance(found, Located) and isinstance(found.node, ast.expr):
            return key, found
        if (
            isinstance(found, Unresolved)
            and " defines no " not in found.reason
            and " has no attribute " not in found.reason
        ):
            return found
    return None


def _django_settings(values: StaticValues, node: ast.AST) -> Located | Unresolved:
    """The settings module `os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)` names in the app's module."""
    for statement in _top_level(values.module.tree.body):
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if len(call.args) == 2 and sets_django_settings_module(call, values):
                module = values.string(call.args[1])
                if isinstance(module, Unresolved):
                    return module
                return values.lookup(module, call)
    for function in ast.walk(values.module.tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(function):
                if isinstance(inner, ast.Call) and sets_django_settings_module(inner, values):
                    # A factory sets it when it runs (and the settings it names may fill themselves at
                    # import): what the app reads there is not provable without running the code.
                    return values.unresolved(
                        node,
                        f"django.conf:settings, and DJANGO_SETTINGS_MODULE is set only inside {function.name}() "
                        f"(line {inner.lineno}), which the gate does not run",
                    )
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
