"""Dramatiq as a CRL2 framework: `@dramatiq.actor(time_limit=...)` and `GenericActor` subclasses with
`class Meta: time_limit = ...`, in milliseconds.

Dramatiq's documented default (10 minutes) counts unless the actor declares otherwise; strict mode demands
an explicit `time_limit`. Its TimeLimit middleware sets each message's deadline to now + time_limit
(dramatiq/middleware/time_limit.py, `before_process_message`), so a zero or negative limit times every
message out at once (a bug, reported as such), and `float("inf")` is its spelling of "no limit"; `None`
is no limit either. A `GenericActor` takes its options from its own `Meta`, else from the nearest base's
(`abstract = True` there makes that base no actor); dramatiq/generic.py, `generic_actor.__new__`.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

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
    shown,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder, Receivers
from corral.gates.knowledge.network_reach import JobEnqueue

GENERIC_ACTORS = frozenset({"dramatiq.GenericActor", "dramatiq.generic.GenericActor"})
INFINITY = frozenset({"math.inf"})
# How many base classes a GenericActor's Meta is looked up through.
_CLASSES_AT_MOST = 16


class Dramatiq(Framework):
    name = "dramatiq"
    # Calling an actor directly runs it synchronously (`Actor.__call__`; dramatiq's tests/test_actors.py,
    # `test_actors_can_be_called`): `call_enqueues` stays False; `.send()` is the enqueue.
    # A GenericActor subclass says no word of its own: a file importing dramatiq is read.
    words = Words(packages=(b"dramatiq",), declaring=(b"actor",), always_read=True)
    default_limit = 600.0
    no_limit_arguments = '(time_limit=float("inf"))'
    decorators = frozenset({"dramatiq.actor", "dramatiq.actor.actor"})
    # An actor's `send` / `send_with_options` put a message on the broker at once (dramatiq/actor.py).
    enqueue_methods = frozenset({"send", "send_with_options"})

    VALID = (
        """
        import dramatiq
        @dramatiq.actor
        def count_words(url): ...
        """,
    )
    INVALID = (
        """
        import dramatiq
        class FetchPage(dramatiq.GenericActor):  # error: 1 CRL203 "time_limit=0 times every message out at once"
            class Meta:
                time_limit = 0
            def perform(self, url): ...
        """,
    )

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        return receivers.task_method(call, self)

    def decorated(self, finder: Finder, site: Decoration) -> None:
        call = site.call
        found = None
        queue = None
        if call is not None:
            queue = string_keyword(call, "queue_name", finder.values, site.scope)
            own = keyword(call, "time_limit")
            if own is not None:
                found = _limit(finder, own.value, site.scope, finder.values)
            elif has_double_star(call):
                found = Limit(unresolved=finder.values.unresolved(call, "time_limit may come from **kwargs"))
        self._report(finder, site.node, site.function, found, None, queue)

    def class_body(self, finder: Finder, cls: ast.ClassDef, scope: Scope) -> None:
        """`class FetchPage(GenericActor): class Meta: time_limit = ...`: an actor, unless its Meta is abstract."""
        meta = _meta(Located(cls, finder.values), 0)
        if meta is None:
            return
        node = ast.copy_location(ast.Name(id=cls.name, ctx=ast.Load()), cls)
        perform = next((item for item in cls.body if isinstance(item, Function) and item.name == "perform"), None)
        if isinstance(meta, Unresolved):
            finder.fail(self, node, perform, UNRESOLVED, f"the Meta of {cls.name} {meta}", name=cls.name)
            return
        options = _options(meta)
        abstract = options.get("abstract")
        if abstract is not None and meta.node is not None and meta.node in cls.body:
            if not (isinstance(abstract, ast.Constant) and isinstance(abstract.value, bool)):
                problem = f"{cls.name}: Meta.abstract = {ast.unparse(abstract)} cannot be read, nor its limit"
                finder.fail(self, node, perform, UNRESOLVED, problem, name=cls.name)
                return
            if abstract.value:
                return  # an abstract base is no actor
        name = _string(options.get("actor_name"), meta.values) or cls.name
        queue = _string(options.get("queue_name"), meta.values)
        given = options.get("time_limit")
        found = _limit(finder, given, None, meta.values) if given is not None else None
        self._report(finder, node, perform, found, name, queue)

    def _report(
        self,
        finder: Finder,
        node: ast.expr,
        function: Function | None,
        found: Limit | None,
        name: str | None,
        queue: str | None,
    ) -> None:
        if found is not None and found.seconds is not None and found.seconds <= 0:
            problem = (
                f"dramatiq: time_limit={shown(found.seconds)} times every message out at once (the deadline is "
                f"now + time_limit); give it a positive time_limit in milliseconds"
            )
            finder.fail(self, node, function, self.code, problem, name=name, queue=queue)
            return
        # Dramatiq's time_limit is in milliseconds.
        finder.default_or_explicit(self, node, function, found, label="time_limit", scale=0.001, name=name, queue=queue)


def _limit(finder: Finder, expression: ast.expr, scope: Scope | None, values: StaticValues) -> Limit:
    """A time_limit: milliseconds (zero or negative kept as they are, for `_report`), or no limit."""
    if _infinite(expression, scope, values):
        return Limit(off='time_limit=float("inf") is Dramatiq\'s "no limit"')
    value = values.number(expression, scope)
    if isinstance(value, Unresolved):
        return Limit(unresolved=value)
    if value is None:
        return Limit(off="time_limit=None is no limit")
    return Limit(seconds=value)


def _infinite(expression: ast.expr, scope: Scope | None, values: StaticValues) -> bool:
    """`float("inf")` / `math.inf`, written there or in the constant `expression` names."""
    if isinstance(expression, ast.Name):
        located = values.definition(expression, scope)
        if isinstance(located, Located) and isinstance(located.node, ast.expr) and located.node is not expression:
            return _infinite(located.node, None, located.values)
        return False
    if values.dotted(expression, scope) in INFINITY:
        return True
    return (
        isinstance(expression, ast.Call)
        and values.dotted(expression.func, scope) == "builtins.float"
        and len(expression.args) == 1
        and isinstance(expression.args[0], ast.Constant)
        and isinstance(expression.args[0].value, str)
        and expression.args[0].value.strip().lstrip("+").lower() in ("inf", "infinity")
    )


class _Meta(NamedTuple):
    """The `Meta` class a GenericActor takes its options from (None: GenericActor's own, which sets none)."""

    node: ast.ClassDef | None
    values: StaticValues


def _meta(located: Located, depth: int) -> _Meta | Unresolved | None:
    """The Meta of the class `located` (None: the class is no GenericActor): its own, else its nearest base's."""
    cls, values = located.node, located.values
    assert isinstance(cls, ast.ClassDef)
    if depth > _CLASSES_AT_MOST:
        return values.unresolved(cls, "too many base classes (a cycle?)")
    own = next((item for item in cls.body if isinstance(item, ast.ClassDef) and item.name == "Meta"), None)
    for base in cls.bases:
        inherited: _Meta | Unresolved | None
        if values.dotted(base) in GENERIC_ACTORS:
            inherited = _Meta(None, values)
        else:
            inner = values.definition(base)
            if not (isinstance(inner, Located) and isinstance(inner.node, ast.ClassDef)) or inner.node is cls:
                continue
            inherited = _meta(inner, depth + 1)
        if inherited is None:
            continue
        if isinstance(inherited, Unresolved):
            return inherited
        return _Meta(own, values) if own is not None else inherited
    return None


def _options(meta: _Meta) -> dict[str, ast.expr]:
    options: dict[str, ast.expr] = {}
    for statement in meta.node.body if meta.node is not None else []:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    options[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            options[statement.target.id] = statement.value
    return options


def _string(expression: ast.expr | None, values: StaticValues) -> str | None:
    text = values.string(expression) if expression is not None else None
    return text if isinstance(text, str) else None


FRAMEWORK = Dramatiq()
