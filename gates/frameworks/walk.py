"""The walk over one module that finds its job kinds, and the readings several frameworks share.

`Finder` walks a module's statements (skipping `if TYPE_CHECKING:` blocks) and hands each framework the
nodes it claims: decorators by their dotted name or as methods of an object a call made, calls by their
dotted name, every dict literal and every class. A decorator that wraps a framework's own (a `partial` of it,
a subclass, an instance already configured, a re-export through a project module) declares that framework's
kinds with the arguments the wrapper presets (see `Wrapper`). It owns what frameworks have in common: reading a limit
expression, the framework default (and strict mode's demand for an explicit limit), the body-only limit
of `asyncio.timeout` / `asyncio.wait_for`, and the kinds found so far.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar, cast

from corral.gates.analysis.modules import Dependency, ModuleInfo, ProjectModules, run_memo
from corral.gates.analysis.names import LOCAL, Scope, is_type_checking_test
from corral.gates.analysis.values import Located, StaticValues, Unresolved
from corral.gates.frameworks.base import (
    BODY,
    DECORATOR,
    DEFAULT,
    UNRESOLVED,
    UNSET,
    Decoration,
    Framework,
    Function,
    JobKind,
    Limit,
    keyword,
    shown,
)
from corral.gates.knowledge.network_reach import JobEnqueue
from corral.gates.source.prefilter import Source

PARTIALS = frozenset({"functools.partial"})
# How many definitions a wrapper is followed through before the walk gives up on it.
_FOLLOW_AT_MOST = 8
ASYNC_TIMEOUTS = frozenset({"asyncio.timeout", "asyncio.timeouts.timeout"})
WAIT_FOR = frozenset({"asyncio.wait_for", "asyncio.tasks.wait_for"})

T = TypeVar("T")


class Dispatch:
    """Which framework reads which node, built once from the frameworks (the first one listed wins)."""

    def __init__(self, frameworks: Sequence[Framework]) -> None:
        self.frameworks = tuple(frameworks)
        self.by_decorator: dict[str, Framework] = {}
        self.by_call: dict[str, Framework] = {}
        # A project decorator is followed as a wrapper only through dotted names holding one of these words
        # at the start of a word (`jobs`, `shared_task`, not `factory`), and only in a file `may_use_wrappers`
        # admits (the CRL2 prefilter admits the same files).
        words = b"|".join(dict.fromkeys(word for framework in self.frameworks for word in framework.words.declaring))
        self.declaring_text = re.compile(r"(?<![A-Za-z])(?:" + words.decode() + ")")
        self.declaring_bytes = re.compile(rb"(?<![A-Za-z])(?:" + words + rb")")
        for framework in self.frameworks:
            for name in framework.decorators:
                self.by_decorator.setdefault(name, framework)
            for name in framework.calls:
                self.by_call.setdefault(name, framework)
        self.call_methods = frozenset(method for framework in self.frameworks for method in framework.call_methods)


def may_use_wrappers(source: Source, dispatch: Dispatch) -> bool:
    """Whether the file may use a framework decorator wrapped in another project module, as `Finder` follows
    one: a decorator, and a declaring word in its imports (`from app.jobs import mail`) or in the package
    its relative imports resolve in. The CRL2 prefilter admits these files; `Finder` follows wrappers out of
    no other file, so skipping one hides nothing."""
    if not source.has(b"@"):
        return False
    return dispatch.declaring_bytes.search(source.imports) is not None or any(
        dispatch.declaring_text.search(part) is not None for part in source.package
    )


class Wrapper(NamedTuple):
    """A decorator that stands for a framework's own: the arguments it presets (already folded to constants
    where they are defined, when they are constants), the call of a framework decorator it already is (an
    instance configured once, used bare), and the chain that leads to it, for the messages."""

    framework: Framework
    args: tuple[ast.expr, ...] = ()
    keywords: tuple[ast.keyword, ...] = ()
    configured: ast.Call | None = None
    chain: tuple[str, ...] = ()
    unreadable: str | None = None
    made: Made | None = None  # the object whose method the framework decorator is (`app` of `app.task`)


class Made(NamedTuple):
    """The framework call that made an object (`Celery(...)`), what it calls (see `maker_of`), and the calls
    of the project factory functions it was made through, outermost first."""

    owner: Located
    maker: str
    factories: tuple[Located, ...] = ()


class Finder:
    """The job kinds of one module, found by one walk over it."""

    def __init__(self, values: StaticValues, dispatch: Dispatch, *, strict: bool, follows_wrappers: bool) -> None:
        self.values = values
        self.names = values.module.names
        self.dispatch = dispatch
        self.strict = strict
        self.follows_wrappers = follows_wrappers
        self.kinds: list[JobKind] = []
        # Calls a framework already read as part of a declaration: the walk does not hand them out again.
        self.seen_calls: set[int] = set()
        self._memo: dict[str, object] = {}

    # -- walking -------------------------------------------------------------------------------

    def walk(self, body: list[ast.stmt], scope: Scope) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in statement.decorator_list:
                    self._decorator(decorator, statement, scope)
                self._calls(statement.decorator_list, scope)
                self.walk(statement.body, self.names.scope_of(statement))
            elif isinstance(statement, ast.ClassDef):
                for framework in self.dispatch.frameworks:
                    framework.class_body(self, statement, scope)
                self.walk(statement.body, self.names.scope_of(statement))
            elif isinstance(statement, ast.If) and is_type_checking_test(statement.test, self.names, scope):
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

    def declared_by(self, function: Function, scope: Scope) -> list[JobKind]:
        """The kinds the decorators of `function` (defined in `scope`) declare, read without the rest of the module."""
        for decorator in function.decorator_list:
            self._decorator(decorator, function, scope)
        return self.kinds

    def _calls(self, expressions: list[ast.expr], scope: Scope) -> None:
        """The declaring calls and the dict literals among `expressions`."""
        for expression in expressions:
            for node in ast.walk(expression):
                if isinstance(node, ast.Call) and id(node) not in self.seen_calls:
                    called = self.values.dotted(node.func, scope)
                    framework = self.dispatch.by_call.get(called) if called is not None else None
                    if framework is not None:
                        framework.called(self, node, scope)
                    elif isinstance(node.func, ast.Call) and len(node.args) == 1 and not node.keywords:
                        self._applied(node.func, node.args[0], scope)
                    elif isinstance(node.func, ast.Attribute):
                        self._method_called(node, node.func, scope)
                elif isinstance(node, ast.Dict):
                    for framework in self.dispatch.frameworks:
                        framework.mapping(self, node, scope)

    def _applied(self, decorator: ast.Call, argument: ast.expr, scope: Scope) -> None:
        """A decorator applied as a call (`app.task(time_limit=30)(send)`): a declaration when the decorator
        is a framework's, read as if it decorated the function `argument` names."""
        named = self.values.dotted(decorator.func, scope)
        if named not in self.dispatch.by_decorator and not self.dispatch.declaring_text.search(
            ast.unparse(decorator.func)
        ):
            return  # a framework's decorator, or a name saying task, job... (not `partial(f)(x)` and the like)
        function = self.function(argument, scope)
        found = len(self.kinds)
        self._decorator(decorator, function, scope, argument)
        if len(self.kinds) > found:
            self.seen_calls.add(id(decorator))  # read as the declaration: not a call of its own

    def _method_called(self, call: ast.Call, method: ast.Attribute, scope: Scope) -> None:
        """A call of a method that declares a kind on an object a framework call made (`app.register_task`)."""
        if method.attr not in self.dispatch.call_methods:
            return
        made = self.made(method.value, scope)
        if made is None:
            return
        for framework in self.dispatch.frameworks:
            if framework.owns_call(made.maker, method.attr):
                framework.method_called(self, call, scope, made)
                return

    def _decorator(
        self, decorator: ast.expr, function: Function | None, scope: Scope, applied_to: ast.expr | None = None
    ) -> None:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call is not None else decorator
        called = self.values.dotted(target, scope)
        framework = self.dispatch.by_decorator.get(called) if called is not None else None
        if framework is not None:
            self._declared(
                framework,
                decorator,
                function,
                applied_to,
                lambda found: Decoration(decorator, call, found, scope, None),
            )
            return
        wrapper = self._wrapper(target, scope, self.values, 0)
        if wrapper is not None and wrapper.chain:
            if function is None:
                self._not_a_function(wrapper.framework, decorator, applied_to)
            else:
                self._wrapped(wrapper, decorator, call, function, scope)
        elif isinstance(target, ast.Attribute):
            made = self.made(target.value, scope)
            if made is None:
                return
            for framework in self.dispatch.frameworks:
                if framework.owns_method(made.maker, target.attr):
                    self._declared(
                        framework,
                        decorator,
                        function,
                        applied_to,
                        lambda found: Decoration(decorator, call, found, scope, made.owner, made.factories),
                    )
                    return

    def _declared(
        self,
        framework: Framework,
        decorator: ast.expr,
        function: Function | None,
        applied_to: ast.expr | None,
        site: Callable[[Function], Decoration],
    ) -> None:
        if function is None:
            self._not_a_function(framework, decorator, applied_to)
        else:
            framework.decorated(self, site(function))

    def _not_a_function(self, framework: Framework, decorator: ast.expr, applied_to: ast.expr | None) -> None:
        shown_argument = ast.unparse(applied_to) if applied_to is not None else "?"
        located = self.values.definition(applied_to) if applied_to is not None else None
        why = f" ({located})" if isinstance(located, Unresolved) else ""
        problem = (
            f"{ast.unparse(decorator)} applied to {shown_argument}, which is no function defined in this module"
            f"{why}: the gate cannot read the job kind it declares"
        )
        self.fail(framework, decorator, None, UNRESOLVED, problem, name=shown_argument)

    # -- the objects frameworks make -----------------------------------------------------------

    def made(self, node: ast.expr, scope: Scope | None, values: StaticValues | None = None) -> Made | None:
        """The framework call that made the object `node` (evaluated by `values`, by default this module's)
        names (`Celery(...)` for `app`), through project factory functions returning it (`app = make_celery()`,
        `def make_celery(): return Celery(...)`)."""
        owner = (values or self.values).definition(node, scope)
        factories: list[Located] = []
        for _ in range(_FOLLOW_AT_MOST):
            if isinstance(owner, Unresolved) or not isinstance(owner.node, ast.Call):
                return None
            func = owner.node.func
            factory = owner.values.definition(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
            if not (isinstance(factory, Located) and isinstance(factory.node, ast.FunctionDef)):
                maker = maker_of(owner.node, owner.values)
                return Made(owner, maker, tuple(factories)) if maker is not None else None
            returned = returned_call(factory.node)
            if returned is None:
                return None
            factories.append(owner)
            owner = Located(returned, factory.values)
        return None

    # -- wrappers of a framework's decorator ---------------------------------------------------

    def _wrapper(self, node: ast.AST, scope: Scope | None, values: StaticValues, depth: int) -> Wrapper | None:
        """The framework decorator `node` (evaluated by `values`) stands for, None when it is none."""
        if depth > _FOLLOW_AT_MOST or not isinstance(node, ast.expr):
            return None
        if depth > 0 and isinstance(node, ast.Attribute):
            # Inside a chain (`partial(app.task, ...)`), a method of an object a framework made; the decorator
            # itself (`@app.task`) is read by `_decorator`.
            made = self.made(node.value, scope, values)
            if made is not None:
                for framework in self.dispatch.frameworks:
                    if framework.owns_method(made.maker, node.attr):
                        return Wrapper(framework, made=made)
        dotted = values.dotted(node, scope)
        if dotted is not None:
            # Out of the checked file only through a name that says job, task... (the prefilter's promise).
            leaves_file = values is self.values and dotted not in self.dispatch.by_decorator
            if leaves_file and not (self.follows_wrappers and self.dispatch.declaring_text.search(dotted) is not None):
                return None
            return self._wrapper_of_dotted(dotted, values, depth)
        located = values.definition(node, scope)
        if isinstance(located, Unresolved) or located.node is node:
            return None
        return self._wrapper_of(located, depth + 1)

    def _wrapper_of_dotted(self, dotted: str, values: StaticValues, depth: int) -> Wrapper | None:
        framework = self.dispatch.by_decorator.get(dotted)
        if framework is not None:
            return Wrapper(framework)
        module_name, _, name = dotted.rpartition(".")
        module = values.project.module(module_name) if module_name and depth < _FOLLOW_AT_MOST else None
        bindings = module.bindings.get(name, []) if module is not None else []
        if module is None or len(bindings) != 1:
            return None
        (binding,) = bindings
        inner = values.for_module(module)
        if isinstance(binding, (ast.Import, ast.ImportFrom)):
            target = module.names.root.lookup(name)
            found = self._wrapper_of_dotted(target, inner, depth + 1) if target is not None else None
            if found is None:
                return None
            return found._replace(chain=(f"{target} re-exported by {inner.where(binding)}", *found.chain))
        return self._wrapper_of(Located(binding, inner), depth + 1)

    def _wrapper_of(self, located: Located, depth: int) -> Wrapper | None:
        node, values = located.node, located.values
        if isinstance(node, ast.Call):
            if values.dotted(node.func) in PARTIALS and node.args:
                inner = self._wrapper(node.args[0], None, values, depth + 1)
                if inner is None or inner.configured is not None:
                    return None
                keywords = {item.arg: item for item in inner.keywords}
                keywords.update((item.arg, _folded_keyword(item, values)) for item in node.keywords)
                return inner._replace(
                    args=(*inner.args, *(_folded(argument, values) for argument in node.args[1:])),
                    keywords=tuple(keywords.values()),
                    chain=(*inner.chain, f"partial({ast.unparse(node.args[0])}, ...) at {values.where(node)}"),
                )
            inner = self._wrapper(node.func, None, values, depth + 1)
            if inner is None or inner.configured is not None or inner.unreadable is not None:
                return None
            configured = ast.Call(
                func=node.func,
                args=[*inner.args, *(_folded(argument, values) for argument in node.args)],
                keywords=[*inner.keywords, *(_folded_keyword(item, values) for item in node.keywords)],
            )
            step = f"{ast.unparse(node.func)}(...) configured at {values.where(node)}"
            return inner._replace(configured=ast.copy_location(configured, node), chain=(*inner.chain, step))
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                inner = self._wrapper(base, None, values, depth + 1)
                if inner is not None and inner.configured is None:
                    steps = (*inner.chain, f"class {node.name}({ast.unparse(base)}) at {values.where(node)}")
                    if any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body):
                        unreadable = f"{node.name} overrides methods of {ast.unparse(base)}: its limit cannot be read"
                        return inner._replace(chain=steps, unreadable=unreadable)
                    return inner._replace(chain=steps)
            return None
        if isinstance(node, ast.FunctionDef):
            return self._factory(node, values, depth)
        if isinstance(node, (ast.Name, ast.Attribute)):
            # `job = rq_job`: a re-export by assignment, a step of the chain as one by import is.
            inner = self._wrapper(node, None, values, depth + 1)
            if inner is None:
                return None
            return inner._replace(chain=(*inner.chain, f"{ast.unparse(node)} assigned at {values.where(node)}"))
        return None

    def _factory(self, function: ast.FunctionDef, values: StaticValues, depth: int) -> Wrapper | None:
        """A decorator factory that hands every keyword it is given to a framework decorator it returns
        (`def task(**options): return app.task(**options)`, maybe with presets of its own:
        `app.task(queue="mail", **options)`): a wrapper presetting those. Any other function is None."""
        arguments = function.args
        options = arguments.kwarg
        if (
            options is None
            or arguments.posonlyargs
            or arguments.args
            or arguments.vararg
            or arguments.kwonlyargs
            or function.decorator_list
            or not function.body
        ):
            return None
        body = function.body[1:] if _is_docstring(function.body[0]) else function.body
        if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
            return None
        returned = body[0].value
        forwarded = [item for item in returned.keywords if item.arg is None]
        if (
            returned.args
            or len(forwarded) != 1
            or not (isinstance(forwarded[0].value, ast.Name) and forwarded[0].value.id == options.arg)
        ):
            return None
        inner = self._wrapper(returned.func, None, values, depth + 1)
        if inner is None or inner.configured is not None:
            return None
        keywords = {item.arg: item for item in inner.keywords}
        keywords.update((item.arg, _folded_keyword(item, values)) for item in returned.keywords if item.arg)
        step = f"{function.name}() returning {ast.unparse(returned.func)}(...) at {values.where(function)}"
        return inner._replace(keywords=tuple(keywords.values()), chain=(*inner.chain, step))

    def _wrapped(
        self, wrapper: Wrapper, decorator: ast.expr, call: ast.Call | None, function: Function, scope: Scope
    ) -> None:
        framework, chain = wrapper.framework, "; ".join(wrapper.chain)
        if wrapper.unreadable is not None:
            self.fail(framework, decorator, function, UNRESOLVED, f"{wrapper.unreadable} ({chain})")
            return
        if wrapper.configured is not None:
            if call is not None:
                return  # a configured decorator called again is not a declaration the gate knows
            merged = wrapper.configured
        else:
            keywords = {item.arg: item for item in wrapper.keywords}
            if call is not None:
                keywords.update((item.arg, item) for item in call.keywords if item.arg is not None)
                given = [item for item in call.keywords if item.arg is None]
            else:
                given = []
            args = [*wrapper.args, *(call.args if call is not None else ())]
            merged = ast.copy_location(
                ast.Call(func=decorator, args=args, keywords=[*keywords.values(), *given]), decorator
            )
        found = len(self.kinds)
        made = wrapper.made
        owner, factories = (made.owner, made.factories) if made is not None else (None, ())
        framework.decorated(self, Decoration(decorator, merged, function, scope, owner, factories))
        for index in range(found, len(self.kinds)):
            kind = self.kinds[index]
            if kind.problem is not None:
                self.kinds[index] = kind._replace(problem=f"{kind.problem} (through {chain})")

    def imports(self, package: str) -> bool:
        """Whether the module binds a name to `package` or one of its modules."""
        return any(
            target == package or target.startswith(package + ".") for target in self.names.root.bindings.values()
        )

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()`, once per module (a framework's project-wide scan, say)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    # -- what frameworks report ----------------------------------------------------------------

    def add(
        self,
        framework: Framework,
        node: ast.expr,
        function: Function | None,
        *,
        name: str | None = None,
        queue: str | None = None,
        timeout: float | None = None,
        source: str | None = None,
        code: str | None = None,
        problem: str | None = None,
    ) -> None:
        named = name or (function.name if function is not None else ast.unparse(node))
        self.kinds.append(JobKind(framework.name, named, queue, node, function, timeout, source, code, problem))

    def fail(
        self,
        framework: Framework,
        node: ast.expr,
        function: Function | None,
        code: str,
        problem: str,
        *,
        name: str | None = None,
        queue: str | None = None,
    ) -> None:
        self.add(framework, node, function, name=name, queue=queue, code=code, problem=problem)

    # -- shared readings -----------------------------------------------------------------------

    def limit(self, expression: ast.expr, scope: Scope | None, label: str, values: StaticValues | None = None) -> Limit:
        """A limit expression: positive seconds, `None` (unset), zero/negative (off) or unresolvable."""
        evaluator = values or self.values
        value = evaluator.number(expression, scope)
        if isinstance(value, Unresolved):
            return Limit(unresolved=value)
        if value is None:
            return UNSET
        if value <= 0 or not math.isfinite(value):
            return Limit(off=f"{label}={shown(value)} is no limit")
        return Limit(seconds=value)

    def function(self, node: ast.expr, scope: Scope) -> Function | None:
        """The function of this module `node` names (None for one of another module: the CRL210 rule reads the
        body of what this file declares)."""
        located = self.values.definition(node, scope)
        if (
            isinstance(located, Located)
            and located.values is self.values
            and isinstance(located.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ):
            return located.node
        return None

    def default_or_explicit(
        self,
        framework: Framework,
        node: ast.expr,
        function: Function | None,
        found: Limit | None,
        *,
        label: str,
        scale: float = 1.0,
        name: str | None = None,
        queue: str | None = None,
    ) -> None:
        """`found` is the declared limit (None: not declared); without one the framework's default applies
        unless strict mode demands an explicit declaration."""
        default = framework.default_limit
        assert default is not None, f"{framework.name} has no default limit"
        if found is not None and found.unresolved is not None:
            self.fail(framework, node, function, UNRESOLVED, f"{label} {found.unresolved}", name=name, queue=queue)
        elif found is not None and found.off is not None:
            problem = f"{framework.name}: {found.off}" + ("" if found.refused else ", which turns the limit off")
            self.fail(framework, node, function, framework.code, problem, name=name, queue=queue)
        elif found is not None and found.seconds is not None:
            self.add(framework, node, function, timeout=found.seconds * scale, source=DECORATOR, name=name, queue=queue)
        elif self.strict:
            problem = f"strict mode: declare {label} explicitly (the {framework.name} default is {shown(default)} s)"
            self.fail(framework, node, function, framework.code, problem, name=name, queue=queue)
        else:
            self.add(framework, node, function, timeout=default, source=DEFAULT, name=name, queue=queue)

    def body_only(self, framework: Framework, site: Decoration) -> None:
        """A framework without a hard timeout: the body must run inside `asyncio.timeout` / `wait_for`."""
        function = site.function
        limit = self._body_timeout(function)
        if limit.seconds is not None:
            self.add(framework, site.node, function, timeout=limit.seconds, source=BODY, queue=None)
        elif limit.unresolved is not None:
            self.fail(framework, site.node, function, UNRESOLVED, f"the body's timeout {limit.unresolved}")
        else:
            problem = (
                f"{framework.name} has no hard timeout: run the whole body of {function.name} inside "
                f"`async with asyncio.timeout(N)` or `return await asyncio.wait_for(..., N)`"
            )
            self.fail(framework, site.node, function, framework.code, problem)

    def _body_timeout(self, function: Function) -> Limit:
        if not isinstance(function, ast.AsyncFunctionDef):
            return UNSET
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if len(body) != 1:
            return UNSET
        scope = self.names.scope_of(function)
        (statement,) = body
        if isinstance(statement, ast.AsyncWith) and len(statement.items) == 1:
            context = statement.items[0].context_expr
            if isinstance(context, ast.Call) and self.values.dotted(context.func, scope) in ASYNC_TIMEOUTS:
                delay = context.args[0] if context.args else getattr(keyword(context, "delay"), "value", None)
                if delay is not None:
                    return self.limit(delay, scope, "timeout")
        if isinstance(statement, (ast.Return, ast.Expr)) and isinstance(statement.value, ast.Await):
            awaited = statement.value.value
            if isinstance(awaited, ast.Call) and self.values.dotted(awaited.func, scope) in WAIT_FOR:
                delay = (
                    awaited.args[1] if len(awaited.args) > 1 else getattr(keyword(awaited, "timeout"), "value", None)
                )
                if delay is not None:
                    return self.limit(delay, scope, "timeout")
        return UNSET


def declared_kinds(
    function: Function, module: ModuleInfo, project: ProjectModules, dispatch: Dispatch
) -> list[JobKind]:
    """The kinds the decorators of `function` (of `module`) declare under `dispatch`'s frameworks, read as `Finder`
    reads them (wrappers through other project modules included). Answered once per run and dispatch; each
    file asking depends on what the reading read."""
    if not function.decorator_list:
        return []
    memo: dict[Function, tuple[list[JobKind], dict[str, Dependency]]] = run_memo(f"declared kinds {id(dispatch)}")
    known = memo.get(function)
    if known is None:
        with project.recording() as read:
            finder = Finder(StaticValues(module, project), dispatch, strict=False, follows_wrappers=True)
            defined_in = module.names.scope_of(function).parent or module.names.root
            kinds = [kind for kind in finder.declared_by(function, defined_in) if kind.function is function]
        known = memo[function] = (kinds, read)
    else:
        project.replay(known[1])
    return known[0]


class Receivers:
    """What the receiver of a call in `scope` of a module is, as the frameworks' `enqueued` asks: the job kinds
    a function it names declares, the framework call that made the object it names (through a local name
    assigned once, `await` and project factories), and how messages show it."""

    def __init__(self, values: StaticValues, scope: Scope, dispatch: Dispatch) -> None:
        self.values = values
        self.scope = scope
        self.dispatch = dispatch

    def value(self, node: ast.expr) -> ast.expr:
        """`node` with local names assigned once (`sig = task.s(1)`) replaced by their value, `await` unwrapped."""
        for _ in range(_FOLLOW_AT_MOST):
            if isinstance(node, ast.Await):
                node = node.value
                continue
            if not isinstance(node, ast.Name):
                return node
            binder = self.scope.binder(node.id)
            if binder is None or binder.parent is None or binder.bindings.get(node.id) != LOCAL:
                return node
            sites = binder.sites_of(node.id)
            site = sites[0] if len(sites) == 1 else None
            if isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Name):
                node = site.value
            elif isinstance(site, ast.AnnAssign) and site.value is not None:
                node = site.value  # the pre-pass binds a name from a `Name` target only
            else:
                return node
        return node

    def dotted(self, node: ast.expr) -> str | None:
        return self.values.dotted(node, self.scope)

    def declaring(self, node: ast.expr, framework: Framework) -> tuple[list[JobKind], Receivers]:
        """The job kinds of `framework` the decorators of the function `node` names declare (empty when it names
        none), and the receivers of the scope its decorators are evaluated in (to read them further)."""
        located = self.values.definition(node, self.scope) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if not isinstance(located, Located) or not isinstance(located.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [], self
        values, names = located.values, located.values.module.names
        kinds = declared_kinds(located.node, values.module, values.project, self.dispatch)
        defined_in = names.scope_of(located.node).parent or names.root
        mine = [kind for kind in kinds if kind.framework == framework.name]
        return mine, Receivers(values, defined_in, self.dispatch)

    def declares(self, node: ast.expr, framework: Framework) -> bool:
        """Whether the function `node` names declares a job kind of `framework`."""
        return bool(self.declaring(node, framework)[0])

    def task_method(self, call: ast.Call, framework: Framework, on_commit: str | None = None) -> JobEnqueue | None:
        """`call` as an enqueue when it calls a method (`send_receipt.delay`) of a function that declares a job kind
        of `framework`; `on_commit` is the method that waits for the commit instead, if the framework has one."""
        func = call.func
        if not isinstance(func, ast.Attribute) or not self.declares(func.value, framework):
            return None
        deferred = f"{self.shown(func.value)}.{on_commit}" if on_commit is not None else None
        return JobEnqueue(self.shown(func), call, on_commit=deferred)

    def made(self, node: ast.expr) -> Made | None:
        """The framework call that made the object `node` names, as `Finder.made` finds it."""
        finder = Finder(self.values, self.dispatch, strict=False, follows_wrappers=False)
        return finder.made(self.value(node), self.scope)

    @staticmethod
    def shown(node: ast.expr) -> str:
        """An expression as messages show it, with the arguments of its calls left out: `send.s(...).delay`."""
        if isinstance(node, ast.Call):
            return f"{Receivers.shown(node.func)}({'...' if node.args or node.keywords else ''})"
        if isinstance(node, ast.Attribute):
            return f"{Receivers.shown(node.value)}.{node.attr}"
        if isinstance(node, ast.Await):
            return f"(await {Receivers.shown(node.value)})"
        return ast.unparse(node)


def maker_of(call: ast.Call, values: StaticValues) -> str | None:
    """The dotted name of what `call` calls, with the methods chained on it written after `()`
    (`taskiq_redis.ListQueueBroker().with_result_backend` for `ListQueueBroker(...).with_result_backend(...)`)."""
    methods: list[str] = []
    node = call
    while isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
        methods.append(node.func.attr)
        node = node.func.value
    dotted = values.dotted(node.func)
    if dotted is None:
        return None
    return dotted + "".join(f"().{method}" for method in reversed(methods))


def returned_call(function: ast.FunctionDef) -> ast.Call | None:
    """The call a factory function returns: its one `return`, of a call or of a local name assigned a call
    once in its body (`app = Celery(...); ...; return app`). None for any other function."""
    returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value
    if isinstance(value, ast.Call):
        return value
    if not isinstance(value, ast.Name):
        return None
    assigned = [
        node.value
        for node in _own_nodes(function)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr))
        and any(isinstance(target, ast.Name) and target.id == value.id for target in _targets(node))
    ]
    if len(assigned) == 1 and isinstance(assigned[0], ast.Call):
        return assigned[0]
    return None


def local_names_of(function: ast.FunctionDef, call: ast.Call) -> set[str]:
    """The local names of `function` assigned the object `call` makes."""
    return {
        target.id
        for node in _own_nodes(function)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is call
        for target in _targets(node)
        if isinstance(target, ast.Name)
    }


def _own_nodes(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, not those of the functions and classes nested in it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        return [node.target]
    return []


def _folded(node: ast.expr, values: StaticValues) -> ast.expr:
    """A preset argument as a constant when its own module gives it one (it is read where it is used);
    otherwise the expression itself."""
    text = values.string(node)
    if isinstance(text, str):
        return ast.copy_location(ast.Constant(text), node)
    number = values.number(node)
    if not isinstance(number, Unresolved):
        return ast.copy_location(ast.Constant(number), node)
    return node


def _folded_keyword(item: ast.keyword, values: StaticValues) -> ast.keyword:
    return ast.keyword(arg=item.arg, value=_folded(item.value, values)) if item.arg is not None else item


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )
