"""Whether a call runs the body of the function it calls where it stands, or only makes an object that runs it later.

Calling a plain function runs its body. Calling an `async def` makes a coroutine: its body runs where the
coroutine is awaited (`await f()`), passed straight to an awaited `asyncio.gather` / `wait_for` / `shield`
(`await asyncio.gather(f(), *[g(x) for x in xs])`) or to one handed on to what runs it
(`asyncio.run(asyncio.wait_for(f(), 5))`), or to `asyncio.run` / `loop.run_until_complete`. Calling a
generator function (a `def` whose own body has `yield` / `yield from`) makes a generator: its body runs
where it is iterated (a `for` loop's or an eager comprehension's iterable, a generator expression's when that
is iterated, the first argument of `list`/`tuple`/`set`/`frozenset`/`dict`/`sorted`/`sum`/`any`/`all`/`next`,
the only one of `min`/`max`, `yield from`) or entered as a `with` item (a `@contextmanager` function runs up
to its `yield`). An async generator runs where it is an `async for` iterable (or an `async` comprehension's)
or an `async with` item (`@asynccontextmanager`). A coroutine or generator bound to a name and consumed
later, or handed to `asyncio.create_task` (CRL1's business), is not run by the call: `runs_body` says False.

A function object handed to a builtin that calls it is called there too (`applied_callables`): `sorted`'s,
`min`'s and `max`'s `key=` at once; `map`'s and `filter`'s function where the map or filter is iterated, as a
generator is (`list(map(task.delay, ids))`, `for x in filter(check, xs)`). One bound to a name and iterated
later, or returned, is not called there.
"""

from __future__ import annotations

import ast
import weakref
from typing import NamedTuple

from corral.gates.analysis.modules import ModuleInfo, run_memo
from corral.gates.analysis.names import LOOP, Scope
from corral.gates.analysis.nodes import children, walk

Function = ast.FunctionDef | ast.AsyncFunctionDef

# Builtins whose first argument they iterate at once.
ITERATING_BUILTINS = frozenset(
    {"list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "any", "all", "next", "min", "max"}
)
# Awaited, these run the coroutines passed to them (every positional argument of `gather`, the first of the
# others); `asyncio.run` runs its argument without being awaited.
_AWAITING = {"gather": None, "wait_for": 1, "shield": 1}
AWAITING = frozenset(f"asyncio{module}.{name}" for module in ("", ".tasks") for name in _AWAITING)
RUNNING = frozenset({"asyncio.run", "asyncio.runners.run", f"{LOOP}.run_until_complete"})
_CONSUMERS = frozenset({*_AWAITING, "run", "run_until_complete", *ITERATING_BUILTINS})
# With a second argument these compare their arguments rather than iterate the first.
_ONE_ARGUMENT = frozenset({"min", "max"})

PLAIN, GENERATOR, COROUTINE, ASYNC_GENERATOR = "plain", "generator", "coroutine", "async generator"


class _Drivers(NamedTuple):
    """The calls of one module in a place that runs what they return, by how."""

    awaited: set[ast.Call]
    # Iterated (or entered as a `with` item): whether asynchronously, and the builtin call iterating it, if any.
    iterated: dict[ast.Call, tuple[bool, ast.Call | None]]
    # Passed to a call that may run the coroutine (`asyncio.gather(...)`, `asyncio.run(...)`): that call.
    passed: dict[ast.Call, ast.Call]


def kind_of(function: Function) -> str:
    """Whether calling `function` runs it (`PLAIN`) or makes a generator, coroutine or async generator."""
    memo: dict[Function, str] = run_memo("function kinds")
    known = memo.get(function)
    if known is None:
        yields = _yields(function)
        if isinstance(function, ast.AsyncFunctionDef):
            known = ASYNC_GENERATOR if yields else COROUTINE
        else:
            known = GENERATOR if yields else PLAIN
        memo[function] = known
    return known


def runs_body(call: ast.Call, function: Function, scope: Scope, module: ModuleInfo) -> bool:
    """Whether `call`, met in `scope` of `module`, runs the body of `function` (what it calls) there."""
    kind = kind_of(function)
    if kind == PLAIN:
        return True
    drivers = _drivers(module)
    if kind == COROUTINE:
        if call in drivers.awaited:
            return True
        return _run_by_consumer(call, drivers, scope, module)
    iterated = drivers.iterated.get(call)
    if iterated is None:
        return False
    asynchronous, builtin = iterated
    if asynchronous != (kind == ASYNC_GENERATOR):
        return False
    # The builtin itself, not a name the module rebinds.
    return builtin is None or (
        isinstance(builtin.func, ast.Name) and scope.lookup(builtin.func.id) == f"builtins.{builtin.func.id}"
    )


def applied_callables(call: ast.Call, scope: Scope, module: ModuleInfo) -> list[ast.expr]:
    """The function objects `call` (met in `scope` of `module`) calls where it stands: `sorted`'s, `min`'s and
    `max`'s `key=`, and `map`'s or `filter`'s function when that map or filter is iterated there."""
    func = call.func
    if not isinstance(func, ast.Name) or func.id not in _APPLYING or scope.lookup(func.id) != f"builtins.{func.id}":
        return []
    if func.id in _KEYED:
        return [keyword.value for keyword in call.keywords if keyword.arg == "key"]
    if len(call.args) < 2 or any(isinstance(argument, ast.Starred) for argument in call.args[:1]):
        return []
    iterated = _drivers(module).iterated.get(call)
    if iterated is None or iterated[0]:
        return []
    builtin = iterated[1]
    if builtin is not None and not (
        isinstance(builtin.func, ast.Name) and scope.lookup(builtin.func.id) == f"builtins.{builtin.func.id}"
    ):
        return []
    function = call.args[0]
    return [] if isinstance(function, ast.Constant) else [function]


# Builtins that call a function they are given: with it as `key=`, at once; as their first argument, lazily.
_KEYED = frozenset({"sorted", "min", "max"})
_APPLYING = frozenset({*_KEYED, "map", "filter"})


def _run_by_consumer(call: ast.Call, drivers: _Drivers, scope: Scope, module: ModuleInfo) -> bool:
    """Whether the call `call` is passed to runs it: `asyncio.run` does; `gather` / `wait_for` / `shield` do
    when they are awaited or handed on to one that runs them (`asyncio.run(asyncio.wait_for(fetch(), 5))`)."""
    consumer = drivers.passed.get(call)
    while consumer is not None:
        called = module.names.resolve(consumer.func, scope)
        if called in RUNNING:
            return True
        if called not in AWAITING:
            return False
        if consumer in drivers.awaited:
            return True
        consumer = drivers.passed.get(consumer)
    return False


def _yields(function: Function) -> bool:
    """Whether the function's own body (not a function, lambda or class nested in it) yields."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(children(node))
    return False


def _drivers(module: ModuleInfo) -> _Drivers:
    """The module's calls in a place that runs what they return, found by one walk on first need."""
    known = _DRIVERS.get(module)
    if known is None:
        known = _DRIVERS[module] = _Drivers(set(), {}, {})
        for node in walk(module.tree):
            _note(node, known)
    return known


# Kept as long as the module is: a checked file's module goes with its check.
_DRIVERS: weakref.WeakKeyDictionary[ModuleInfo, _Drivers] = weakref.WeakKeyDictionary()


def _note(node: ast.AST, drivers: _Drivers) -> None:
    if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
        drivers.awaited.add(node.value)
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        _iterated(node.iter, isinstance(node, ast.AsyncFor), None, drivers)
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
        # Run at once; a generator expression only when it is iterated itself (see `_iterated`).
        for generator in node.generators:
            _iterated(generator.iter, bool(generator.is_async), None, drivers)
    elif isinstance(node, ast.YieldFrom):
        _iterated(node.value, False, None, drivers)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if isinstance(item.context_expr, ast.Call):
                drivers.iterated[item.context_expr] = (isinstance(node, ast.AsyncWith), None)
    elif isinstance(node, ast.Call) and node.args:
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in _CONSUMERS:
            return
        if (
            isinstance(node.func, ast.Name)
            and name in ITERATING_BUILTINS
            and (name not in _ONE_ARGUMENT or len(node.args) == 1)
        ):
            _iterated(node.args[0], False, node, drivers)
        passed = node.args if _AWAITING.get(name, 1) is None else node.args[:1]
        for argument in passed:
            for made in _calls_passed(argument):
                drivers.passed[made] = node


def _iterated(expression: ast.expr, asynchronous: bool, builtin: ast.Call | None, drivers: _Drivers) -> None:
    if isinstance(expression, ast.Call):
        drivers.iterated[expression] = (asynchronous, builtin)
    elif isinstance(expression, ast.GeneratorExp):
        # Iterating a generator expression iterates its own iterables.
        for generator in expression.generators:
            _iterated(generator.iter, bool(generator.is_async), builtin, drivers)


def _calls_passed(argument: ast.expr) -> list[ast.Call]:
    """The calls an argument passes as values: itself, or the elements of a starred list, tuple or comprehension
    (`*[fetch(u) for u in urls]`)."""
    if isinstance(argument, ast.Call):
        return [argument]
    if isinstance(argument, ast.Starred):
        spread = argument.value
        if isinstance(spread, (ast.List, ast.Tuple)):
            return [element for element in spread.elts if isinstance(element, ast.Call)]
        if isinstance(spread, (ast.ListComp, ast.GeneratorExp)) and isinstance(spread.elt, ast.Call):
            return [spread.elt]
    return []
