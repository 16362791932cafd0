"""RQ as a CRL2 framework: `@job(queue, timeout=...)` of `rq.decorators`, django-rq's `@job` (bare or
called), which passes its arguments on to RQ's, and each `Queue(...).enqueue*(fn, ..., job_timeout=...)`.

The decorator's timeout is `timeout=` / `job_timeout=` or the third positional argument, in seconds or as a
duration string (`"5m"`, `"1h"`). An enqueue's is `job_timeout=` (`timeout=` of `enqueue_call`), else the
queue's `default_timeout=`; `enqueue`, `enqueue_in` and `enqueue_at` pass a `timeout=` on to the function
(rq/queue.py, `parse_args` pops only `job_timeout`), so it is no limit there. A django-rq queue (its `@job`
without a timeout, `get_queue("name")`) takes its default_timeout from the `RQ_QUEUES` setting of the
project's settings modules. RQ's documented default (180 s)
counts unless the limit is turned off (`-1`, or a negative default); a job's `timeout=0` / `job_timeout=0` is
an error RQ raises at enqueue (`Queue.create_job`: "0 timeout is not allowed"), reported as such; strict mode
demands an explicit timeout.
"""

from __future__ import annotations

import ast
import re

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Located, StaticValues, Unresolved
from corral.gates.frameworks.base import (
    UNRESOLVED,
    Decoration,
    Framework,
    Function,
    Limit,
    Words,
    has_double_star,
    keyword,
    string_argument,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder, Made, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", re.IGNORECASE)
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
QUEUES = frozenset({"rq.Queue", "rq.queue.Queue"})
# django-rq's queues, named in the Django setting RQ_QUEUES, whose "DEFAULT_TIMEOUT" is each queue's
# default_timeout (django_rq/queues.py, `get_queue`); its `@job` takes its queue by name through `get_queue`.
DJANGO_QUEUES = frozenset({"django_rq.get_queue", "django_rq.queues.get_queue"})
DJANGO_JOBS = frozenset({"django_rq.job", "django_rq.decorators.job"})
SETTING, SETTING_KEY = "RQ_QUEUES", "DEFAULT_TIMEOUT"
# The enqueueing methods of a queue, the keyword each takes its job's timeout by, and the position of the
# function among its arguments (rq/queue.py: `enqueue_in(time_delta, func, ...)`, `enqueue_at(datetime, f, ...)`).
ENQUEUES = {"enqueue": ("job_timeout", 0), "enqueue_call": ("timeout", 0), "enqueue_in": ("job_timeout", 1)}
ENQUEUES["enqueue_at"] = ENQUEUES["enqueue_in"]
# What else enqueues a job (CRL402): a `@job` function's `delay` (rq/decorators.py), a queue's `enqueue_many`,
# and django-rq's module-level `enqueue(fn, ...)` (django_rq/queues.py: `get_queue().enqueue`).
DELAY = "delay"
ENQUEUE_MANY = "enqueue_many"
# The limits RQ's Queue.create_job is given for one job, which refuse 0 (a queue's default_timeout does not).
PER_JOB_LABELS = frozenset({"timeout", "job_timeout"})
DJANGO_ENQUEUE = frozenset({"django_rq.enqueue", "django_rq.queues.enqueue"})
# Where an enqueued job's limit comes from.
ENQUEUED, QUEUE = "enqueue", "queue default_timeout"


class Rq(Framework):
    name = "rq"
    # `@job` only adds a `delay` method and returns the function itself (rq/decorators.py: "A decorator that adds
    # a ``delay`` method to the decorated function", `f.delay = delay; return f`; django-rq's `job` wraps it):
    # calling it runs the body, so `call_enqueues` stays False.
    words = Words(packages=(b"rq", b"django_rq"), declaring=(b"job", b"enqueue"), methods=tuple(ENQUEUES))
    call_methods = frozenset(ENQUEUES)
    default_limit = 180.0
    no_limit_arguments = '("default", timeout=-1)'
    decorators = frozenset({"rq.decorators.job"}) | DJANGO_JOBS
    enqueue_methods = frozenset({*ENQUEUES, ENQUEUE_MANY, DELAY})

    INVALID = (
        """
        from rq.decorators import job
        @job("low", timeout=-1)  # error: 2 CRL203 "rq: timeout=-1 (no limit)"
        def crawl(url): ...
        """,
        """
        from functools import partial
        from rq.decorators import job
        background = partial(job, "low", timeout=-1)
        @background  # error: 2 CRL203 "through partial(job, ...) at"
        def crawl(url): ...
        """,
    )

    def decorated(self, finder: Finder, site: Decoration) -> None:
        call = site.call
        found = None
        queue = string_argument(call, finder.values, site.scope) if call is not None else None
        if call is not None:
            own = keyword(call, "timeout") or keyword(call, "job_timeout")
            expression = own.value if own is not None else (call.args[2] if len(call.args) > 2 else None)
            if expression is not None:
                found = _timeout(finder, expression, site.scope)
            elif has_double_star(call):
                found = Limit(unresolved=finder.values.unresolved(call, "timeout may come from **kwargs"))
        target = call.func if call is not None else site.node
        if found is None and finder.values.dotted(target, site.scope) in DJANGO_JOBS:
            # Bare, or given a function first, django-rq's @job uses the "default" queue.
            named = queue or ("default" if call is None or not call.args else None)
            settled = _settings_default(finder, named, site.node) if named is not None else None
            if settled is not None:
                found, where = settled
                self._found(finder, site.node, site.function, found, QUEUE, site.function.name, named, where)
                return
        finder.default_or_explicit(self, site.node, site.function, found, label="timeout", queue=queue)

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        func = call.func
        assert isinstance(func, ast.Attribute)
        if method == DELAY:
            return receivers.task_method(call, self)
        if receivers.dotted(func) in DJANGO_ENQUEUE:
            known = True
        else:
            made = receivers.made(func.value)
            known = made is not None and (made.maker in QUEUES or made.maker in DJANGO_QUEUES)
        return JobEnqueue(receivers.shown(func), call) if known else None

    def owns_call(self, made: str, attribute: str) -> bool:
        return (made in QUEUES or made in DJANGO_QUEUES) and attribute in ENQUEUES

    def method_called(self, finder: Finder, call: ast.Call, scope: Scope, made: Made) -> None:
        """`queue.enqueue(fn, ..., job_timeout=...)`: the job this call enqueues, limited by its own timeout,
        else its queue's default_timeout, else RQ's default."""
        assert isinstance(call.func, ast.Attribute) and isinstance(made.owner.node, ast.Call)
        method = call.func.attr
        label, position = ENQUEUES[method]
        target = call.args[position] if len(call.args) > position else getattr(keyword(call, "func"), "value", None)
        text = finder.values.string(target, scope) if target is not None else None
        name = text if isinstance(text, str) else ast.unparse(target) if target is not None else method
        function = finder.function(target, scope) if target is not None else None
        queue_call, queue_values = made.owner.node, made.owner.values
        queue = string_argument(queue_call, queue_values, None) or string_keyword(
            queue_call, "name", queue_values, None
        )
        own = keyword(call, label)
        if own is not None:
            found = _timeout(finder, own.value, scope, label)
            if found is not None:
                self._found(finder, call, function, found, ENQUEUED, name, queue)
                return
        elif has_double_star(call):
            problem = f"{method}(**...) may set {label}, which the gate cannot read"
            finder.fail(self, call, function, UNRESOLVED, problem, name=name, queue=queue)
            return
        default = keyword(queue_call, "default_timeout")
        django = made.maker in DJANGO_QUEUES
        if default is None and not django and len(queue_call.args) > 2:
            default = ast.keyword(arg="default_timeout", value=queue_call.args[2])
        if default is None and django:
            queue = queue or ("default" if not queue_call.args and keyword(queue_call, "name") is None else None)
            settled = _settings_default(finder, queue, queue_call) if queue is not None else None
            if queue is None:
                problem = f"the queue at {queue_values.where(queue_call)}: its name cannot be read"
                finder.fail(self, call, function, UNRESOLVED, problem, name=name, queue=queue)
                return
            if settled is not None:
                self._found(finder, call, function, settled[0], QUEUE, name, queue, settled[1])
                return
        if default is not None:
            found = _timeout(finder, default.value, None, "default_timeout", queue_values)
            if found is not None:
                at = f"the queue at {queue_values.where(queue_call)}"
                self._found(finder, call, function, found, QUEUE, name, queue, at)
                return
        elif has_double_star(queue_call):
            problem = f"the queue at {queue_values.where(queue_call)}: default_timeout may come from **kwargs"
            finder.fail(self, call, function, UNRESOLVED, problem, name=name, queue=queue)
            return
        finder.default_or_explicit(self, call, function, None, label=label, name=name, queue=queue)

    def _found(
        self,
        finder: Finder,
        call: ast.expr,
        function: Function | None,
        found: Limit,
        source: str,
        name: str,
        queue: str | None,
        where: str | None = None,
    ) -> None:
        """Report a limit read from one place; `where` names that place when it is not the call itself."""
        at = f"{where}: " if where is not None else ""
        if found.unresolved is not None:
            finder.fail(self, call, function, UNRESOLVED, f"{at}{found.unresolved}", name=name, queue=queue)
        elif found.seconds is not None:
            finder.add(self, call, function, timeout=found.seconds, source=source, name=name, queue=queue)
        else:
            problem = f"rq: {at}{found.off}" + ("" if found.refused else ", which turns the limit off")
            finder.fail(self, call, function, self.code, problem, name=name, queue=queue)


def _settings_default(finder: Finder, queue: str, node: ast.AST) -> tuple[Limit, str] | None:
    """The default_timeout django-rq gives `queue`: its "DEFAULT_TIMEOUT" in the RQ_QUEUES of every settings
    module of the project (the shortest; any that turns it off or cannot be read decides). None when no
    settings module gives one (RQ's default then applies)."""
    found: list[tuple[Limit, str]] = []
    for relpath in finder.values.project.files_containing(SETTING.encode()):
        module = finder.values.project.file(relpath)
        if module is None or SETTING not in module.bindings:
            continue
        values = finder.values.for_module(module)
        setting = values.member(Located(module.tree, values), SETTING, node)
        at = values.where(setting.node) if isinstance(setting, Located) else relpath
        where = f"queue {queue!r} in the {SETTING} at {at}"
        if isinstance(setting, Unresolved) or not isinstance(setting.node, ast.Dict):
            reason = setting if isinstance(setting, Unresolved) else values.unresolved(setting.node, "not a dict")
            found.append((Limit(unresolved=reason), where))
            continue
        entry = _entry(setting.node, queue, setting.values)
        if isinstance(entry, Unresolved):
            found.append((Limit(unresolved=entry), where))
        elif entry is not None:
            limit = _timeout(finder, entry[0], None, SETTING_KEY, entry[1])
            if limit is not None:
                found.append((limit, where))
    for limit, where in found:
        if limit.seconds is None:
            return limit, where
    return min(found, key=lambda each: each[0].seconds or 0.0) if found else None


def _entry(settings: ast.Dict, queue: str, values: StaticValues) -> tuple[ast.expr, StaticValues] | Unresolved | None:
    """`RQ_QUEUES[queue]["DEFAULT_TIMEOUT"]` in a dict literal, its queue's settings a dict literal or a
    module-level constant bound to one (None: not given). A key the gate cannot read may be `queue`:
    the limit is then unknown, not RQ's default."""
    for key, value in zip(settings.keys, settings.values, strict=True):
        if key is None:
            return values.unresolved(settings, f"{{**...}} may configure queue {queue!r}")
        name = values.string(key)
        if isinstance(name, Unresolved):
            return Unresolved(f"a key of {SETTING} may be queue {queue!r}: {name.reason}", name.where)
        if name != queue:
            continue
        located = values.definition(value) if isinstance(value, (ast.Name, ast.Attribute)) else Located(value, values)
        if isinstance(located, Unresolved):
            return located
        if not isinstance(located.node, ast.Dict):
            return values.unresolved(value, f"the settings of queue {queue!r} are not a dict literal")
        for inner_key, inner_value in zip(located.node.keys, located.node.values, strict=True):
            if inner_key is None:
                return located.values.unresolved(located.node, f"{{**...}} may set {SETTING_KEY}")
            if located.values.string(inner_key) == SETTING_KEY:
                return inner_value, located.values
        return None
    return None


def _timeout(
    finder: Finder,
    expression: ast.expr,
    scope: Scope | None,
    label: str = "timeout",
    values: StaticValues | None = None,
) -> Limit | None:
    evaluator = values or finder.values
    text = evaluator.string(expression, scope)
    if isinstance(text, str):
        match = _DURATION.fullmatch(text)
        if match:
            return Limit(seconds=float(match.group(1)) * _UNITS[match.group(2).lower()])
    value = evaluator.number(expression, scope)
    if isinstance(value, Unresolved):
        return Limit(unresolved=value)
    if value is None:
        return None  # RQ's default applies
    if value == -1:
        return Limit(off=f"{label}=-1 (no limit)")
    if value == 0 and label in PER_JOB_LABELS:
        # rq/queue.py, Queue.create_job: `elif timeout == 0: raise ValueError('0 timeout is not allowed. ...')`.
        return Limit(
            off=f"{label}=0 is an error RQ refuses at enqueue (0 timeout is not allowed; -1 is no limit)", refused=True
        )
    return finder.limit(expression, scope, label, evaluator)


FRAMEWORK = Rq()
