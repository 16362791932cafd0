"""Import and alias resolution: what a name or attribute in a module refers to, as a dotted name.

One pre-pass per module records each scope's bindings (imports, `from` imports with relative levels,
function-local imports, simple aliases such as `spawn = asyncio.create_task`, factory results such as
`loop = asyncio.get_running_loop()`, parameters annotated as event loops). Rules then ask `resolve(node,
scope)`. Resolution is flow-insensitive within a scope: when a name is bound several ways, a known
dotted name wins over an unknown local value, so an alias cannot hide an API by being rebound.

Symbolic results: `LOOP` stands for "an asyncio event loop", so `loop.create_task` resolves to
`<loop>.create_task` whatever the loop was called.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator

LOOP = "<loop>"
LOCAL = "<local>"

# Calls whose result is a known kind of object.
FACTORIES: dict[str, str] = {
    "asyncio.get_event_loop": LOOP,
    "asyncio.get_running_loop": LOOP,
    "asyncio.new_event_loop": LOOP,
    "asyncio.events.get_event_loop": LOOP,
    "asyncio.events.get_running_loop": LOOP,
    "asyncio.events.new_event_loop": LOOP,
    # A multiprocessing context has the module's Process and Pool.
    "multiprocessing.get_context": "multiprocessing",
    "multiprocessing.context.get_context": "multiprocessing",
}
LOOP_TYPES = frozenset(
    {
        "asyncio.AbstractEventLoop",
        "asyncio.events.AbstractEventLoop",
        "asyncio.BaseEventLoop",
        "asyncio.base_events.BaseEventLoop",
    }
)
_BUILTINS = frozenset(dir(builtins))
TYPE_CHECKING_NAMES = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})


class Scope:
    """The names one module, class or function body binds."""

    __slots__ = ("bindings", "is_class", "parent")

    def __init__(self, parent: Scope | None, *, is_class: bool = False) -> None:
        self.parent = parent
        self.is_class = is_class
        self.bindings: dict[str, str] = {}

    def bind(self, name: str, target: str) -> None:
        if target == LOCAL and self.bindings.get(name, LOCAL) != LOCAL:
            return
        self.bindings[name] = target

    def lookup(self, name: str) -> str | None:
        scope: Scope | None = self
        first = True
        while scope is not None:
            # A class body's names are not visible from the functions nested in it.
            if first or not scope.is_class:
                target = scope.bindings.get(name)
                if target is not None:
                    return None if target == LOCAL else target
            first = False
            scope = scope.parent
        return f"builtins.{name}" if name in _BUILTINS else None


ScopeNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class ModuleNames:
    """Bindings of every scope of one parsed module. `module` is its dotted name (for relative imports)."""

    def __init__(self, tree: ast.Module, module: str, *, is_package: bool = False) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.root = Scope(parent=None)
        self.scopes: dict[ScopeNode, Scope] = {}
        self._collect(tree.body, self.root)

    def scope_of(self, node: ScopeNode) -> Scope:
        return self.scopes[node]

    def resolve(self, node: ast.expr, scope: Scope) -> str | None:
        """The dotted name `node` refers to, `<loop>...` for event loops, or None when unknown."""
        if isinstance(node, ast.Name):
            return scope.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, scope)
            return f"{base}.{node.attr}" if base is not None else None
        if isinstance(node, ast.Call):
            called = self.resolve(node.func, scope)
            return FACTORIES.get(called) if called is not None else None
        if isinstance(node, ast.NamedExpr):
            return self.resolve(node.value, scope)
        return None

    def absolute_module(self, level: int, module: str | None) -> str:
        """The module a `from ... import` names, with relative levels resolved against this module."""
        if level == 0:
            return module or ""
        parts = self.package.split(".") if self.package else []
        base = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        return ".".join([*base, module] if module else base)

    # -- the pre-pass --------------------------------------------------------------------------

    def _collect(self, body: list[ast.stmt], scope: Scope) -> None:
        for statement in body:
            self._collect_statement(statement, scope)

    def _collect_statement(self, statement: ast.stmt, scope: Scope) -> None:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    scope.bind(alias.asname, alias.name)
                else:
                    head = alias.name.partition(".")[0]
                    scope.bind(head, head)
        elif isinstance(statement, ast.ImportFrom):
            origin = self.absolute_module(statement.level, statement.module)
            for alias in statement.names:
                if alias.name != "*":
                    scope.bind(alias.asname or alias.name, f"{origin}.{alias.name}" if origin else alias.name)
        elif isinstance(statement, ast.Assign):
            self._bind_assignment(statement.targets, statement.value, scope)
        elif isinstance(statement, ast.AnnAssign):
            if statement.value is not None:
                self._bind_assignment([statement.target], statement.value, scope)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope.bind(statement.name, LOCAL)
            inner = Scope(parent=scope)
            self.scopes[statement] = inner
            for argument in arguments_of(statement.args):
                loop_typed = argument.annotation is not None and self._names_loop_type(argument.annotation, scope)
                inner.bind(argument.arg, LOOP if loop_typed else LOCAL)
            self._collect(statement.body, inner)
        elif isinstance(statement, ast.ClassDef):
            scope.bind(statement.name, LOCAL)
            inner = Scope(parent=scope, is_class=True)
            self.scopes[statement] = inner
            self._collect(statement.body, inner)
        elif isinstance(statement, (ast.Expr, ast.Return, ast.Pass, ast.AugAssign, ast.Raise, ast.Assert)):
            return
        else:
            self._collect_compound(statement, scope)

    def _collect_compound(self, statement: ast.stmt, scope: Scope) -> None:
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            self._bind_targets(statement.target, scope)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    self._bind_targets(item.optional_vars, scope)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(statement, name, None)
            if block:
                self._collect(block, scope)
        for handler in getattr(statement, "handlers", ()):
            if handler.name:
                scope.bind(handler.name, LOCAL)
            self._collect(handler.body, scope)
        for case in getattr(statement, "cases", ()):
            self._bind_targets(case.pattern, scope)
            self._collect(case.body, scope)

    def _names_loop_type(self, annotation: ast.expr, scope: Scope) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return False
        return any(
            isinstance(node, (ast.Name, ast.Attribute)) and self.resolve(node, scope) in LOOP_TYPES
            for node in ast.walk(annotation)
        )

    def _bind_assignment(self, targets: list[ast.expr], value: ast.expr, scope: Scope) -> None:
        target_name = self.resolve(value, scope) if isinstance(value, (ast.Name, ast.Attribute, ast.Call)) else None
        for target in targets:
            if isinstance(target, ast.Name):
                scope.bind(target.id, target_name or LOCAL)
            else:
                self._bind_targets(target, scope)

    def _bind_targets(self, target: ast.AST, scope: Scope) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                scope.bind(node.id, LOCAL)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                scope.bind(node.name, LOCAL)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                scope.bind(node.rest, LOCAL)


def arguments_of(arguments: ast.arguments) -> Iterator[ast.arg]:
    yield from arguments.posonlyargs
    yield from arguments.args
    if arguments.vararg is not None:
        yield arguments.vararg
    yield from arguments.kwonlyargs
    if arguments.kwarg is not None:
        yield arguments.kwarg


def is_type_checking_test(node: ast.expr, names: ModuleNames, scope: Scope) -> bool:
    """`if TYPE_CHECKING:` (however imported) guards code that never runs."""
    if isinstance(node, ast.Name) and node.id == "TYPE_CHECKING":
        return True
    return names.resolve(node, scope) in TYPE_CHECKING_NAMES
