"""Python's scopes, and import and alias resolution: what a name or attribute in a module refers to.

This is the one scope model of the gate. A `Scope` is the body of a module, class, function, lambda or
comprehension; `Scope.binder(name)` is the one lexical rule (the nearest enclosing body that binds the
name, class bodies invisible from what is nested in them, `global`/`nonlocal` honoured), and every
analysis that asks "which binding does this name see" asks it: `resolve` here, the static values of
`values.py`, the client and local-function tables (`lookup_in`) of the network rules. Walkers take their
scopes from `ModuleNames` (`scope_of` for functions and classes, `expression_scope` for lambdas and
comprehensions) and walk them with `scoped.py`'s `ScopedVisitor`.

One pre-pass per module records the bindings of the module's, each function's and each class's scope
(imports, `from` imports with relative levels, function-local imports, simple aliases such as
`spawn = asyncio.create_task`, factory results such as `loop = asyncio.get_running_loop()`, parameters
annotated as event loops), each with the node that binds it (`Scope.sites_of`). Rules then ask
`resolve(node, scope)`. Resolution is flow-insensitive within a scope: when a name is bound several ways,
a known dotted name wins over an unknown local value, so an alias cannot hide an API by being rebound.
A name bound to several known names (`try: import threading` / `except ImportError: import
dummy_threading as threading`) keeps every one: `resolve_all` gives each candidate, so a rule asking
whether any binding is an API it knows sees the one a simpler reading (the last binding) would hide.

Symbolic results: `LOOP` stands for "an asyncio event loop", so `loop.create_task` resolves to
`<loop>.create_task` whatever the loop was called. A loop is also a value that may be one (`loop or
asyncio.get_event_loop()`, `a if c else asyncio.get_running_loop()`), a variable annotated with a loop type
(`loop: asyncio.AbstractEventLoop = ...`, a module-level global too), and, for `resolve_all(...,
attributes=True)`, an attribute of `self` that the class's methods assign such a value to or the class
body annotates as a loop (`self.loop = loop or asyncio.get_event_loop()`, then `self.loop.create_task`).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Container, Iterator, Mapping
from typing import NamedTuple, TypeVar

from corral.gates.analysis.nodes import walk_statements

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
_LOOP_PACKAGES = frozenset(name.partition(".")[0] for name in LOOP_TYPES)
_BUILTINS = frozenset(dir(builtins))
TYPE_CHECKING_NAMES = frozenset({"typing.TYPE_CHECKING", "typing_extensions.TYPE_CHECKING"})

_T = TypeVar("_T")


class Scope:
    """The names one module, class, function, lambda or comprehension body binds: the one scope model.

    `bindings` maps each name to what it refers to (a dotted name, `LOOP`, or `LOCAL`: a local value of
    unknown kind), the last known one when there are several; `candidates` holds every known target of a
    name bound to more than one, in binding order. `declared` holds the body's `global` (True) and
    `nonlocal` (False) names: their bindings land in, and their references read, the module's or the
    enclosing function's scope.
    """

    __slots__ = (
        "attributes",
        "bindings",
        "candidates",
        "declared",
        "instance",
        "is_class",
        "is_comprehension",
        "parent",
        "sites",
    )

    def __init__(self, parent: Scope | None, *, is_class: bool = False, is_comprehension: bool = False) -> None:
        self.parent = parent
        self.is_class = is_class
        self.is_comprehension = is_comprehension
        self.bindings: dict[str, str] = {}
        self.candidates: dict[str, list[str]] | None = None
        # A class body: what its methods assign to `self.<name>` (known targets only). A method body: the
        # name of its instance parameter and the class's scope.
        self.attributes: dict[str, list[str]] | None = None
        self.instance: tuple[str, Scope] | None = None
        self.declared: dict[str, bool] | None = None
        # (name, node) for every binding the pre-pass met, in its order: see `sites_of`.
        self.sites: list[tuple[str, ast.AST]] = []

    def declare(self, names: list[str], *, is_global: bool) -> None:
        """`global names` or `nonlocal names` in this body (Python requires it before their first use)."""
        if self.parent is None:
            return  # at module level both are no-ops
        if self.declared is None:
            self.declared = {}
        for name in names:
            self.declared[name] = is_global

    def home(self, name: str) -> Scope:
        """The scope a binding of `name` made in this body lands in: this one, the module's for a `global`
        name, the enclosing function's for a `nonlocal` one, the enclosing body's for a comprehension's
        `:=` target (comprehension targets themselves are bound in the comprehension's scope directly)."""
        scope = self
        while True:
            declared = scope.declared
            if declared is not None and name in declared:
                if declared[name]:
                    while scope.parent is not None:
                        scope = scope.parent
                    return scope
                return scope._enclosing_function(name)
            if not scope.is_comprehension or scope.parent is None:
                return scope
            scope = scope.parent

    def _enclosing_function(self, name: str) -> Scope:
        # The nearest enclosing function scope that binds `name` (or passes it on, `nonlocal` itself),
        # else the nearest one at all: it may bind the name further down, not yet collected.
        nearest: Scope | None = None
        scope = self.parent
        while scope is not None and scope.parent is not None:
            if not scope.is_class and not scope.is_comprehension:
                if name in scope.bindings or (scope.declared is not None and name in scope.declared):
                    return scope.home(name)
                if nearest is None:
                    nearest = scope
            scope = scope.parent
        return nearest if nearest is not None else self

    def bind(self, name: str, target: str, site: ast.AST) -> None:
        """Record that this body binds `name` to `target` at `site`. Flow-insensitive: a known target is
        never replaced by `LOCAL`, so rebinding a name to an unknown value cannot hide an API."""
        scope = self if self.declared is None else self.home(name)
        if not scope.sites or scope.sites[-1] != (name, site):
            scope.sites.append((name, site))  # once, though an assignment may bind each of several targets
        previous = scope.bindings.get(name, LOCAL)
        if target == LOCAL and previous != LOCAL:
            return
        if previous not in (LOCAL, target):
            if scope.candidates is None:
                scope.candidates = {}
            known = scope.candidates.setdefault(name, [previous])
            if target not in known:
                known.append(target)
        scope.bindings[name] = target

    def targets(self, name: str) -> list[str]:
        """Every known target this body binds `name` to (empty for a local value of unknown kind)."""
        if self.candidates is not None and name in self.candidates:
            return self.candidates[name]
        target = self.bindings.get(name, LOCAL)
        return [] if target == LOCAL else [target]

    def sites_of(self, name: str) -> list[ast.AST]:
        """Every node that binds `name` in this body, as the pre-pass met them (statement order, a `try`'s
        handlers after its other blocks): an `alias` of an import, a function or class, a parameter's
        `arg`, the assignment, loop, `with` or handler that binds it, the `case` that captures it, the
        `for` clause of a comprehension.
        With `binder`, all the candidate bindings a reference sees: `scope.binder(name).sites_of(name)`."""
        return [site for bound, site in self.sites if bound == name]

    def binder(self, name: str, known: Mapping[Scope, Container[str]] | None = None) -> Scope | None:
        """The scope whose binding of `name` a reference made in this body sees, None for a builtin or an
        unbound name: the lexical rule every analysis uses.

        The nearest enclosing body that binds the name decides; class bodies are invisible from the
        functions, lambdas and comprehensions nested in them (though a body always sees its own names);
        a `global` name is read from the module, a `nonlocal` one from the enclosing functions. `known`
        adds binding sites an analysis found that the pre-pass does not record (a `:=` target, a bare
        annotation), by the scope they bind in.
        """
        scope: Scope | None = self
        first = True
        while scope is not None:
            if first or not scope.is_class:
                declared = scope.declared
                if declared is not None and name in declared:
                    if declared[name]:
                        while scope.parent is not None:
                            scope = scope.parent
                        # The module body: checked on the next turn, with nothing above it.
                    else:
                        scope = scope.parent
                    first = False
                    continue
                if name in scope.bindings:
                    return scope
                if known is not None:
                    names = known.get(scope)
                    if names is not None and name in names:
                        return scope
            first = False
            scope = scope.parent
        return None

    def lookup(self, name: str) -> str | None:
        """What `name` refers to in this body as a dotted name (`builtins.len` for a builtin), or None
        for a local value or an unbound name."""
        binder = self.binder(name)
        if binder is None:
            return f"builtins.{name}" if name in _BUILTINS else None
        target = binder.bindings[name]
        return None if target == LOCAL else target

    def lookup_all(self, name: str) -> list[str]:
        """Every dotted name `name` may refer to in this body: each known binding of the scope `binder`
        picks (`lookup`'s answer among them), empty for a local value or an unbound name."""
        binder = self.binder(name)
        if binder is None:
            return [f"builtins.{name}"] if name in _BUILTINS else []
        return binder.targets(name)


def lookup_in(table: Mapping[Scope, Mapping[str, list[_T]]], name: str, scope: Scope) -> list[_T]:
    """What an analysis's `table` (scope -> name -> facts) holds for `name` as seen from `scope`: the
    entry of the scope `Scope.binder` picks, counting the table's own entries as bindings; empty when
    that scope binds the name to something the table does not know."""
    binder = scope.binder(name, table)
    if binder is None:
        return []
    return table.get(binder, {}).get(name, [])


ScopeNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class AttributeSite(NamedTuple):
    """One binding of `self.<name>` in a method: the value assigned (None when it is unpacked or only
    annotated), the annotation if any, and the method's scope (where both are read)."""

    value: ast.expr | None
    annotation: ast.expr | None
    scope: Scope


Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
ExpressionScopeNode = ast.Lambda | Comprehension


class ModuleNames:
    """Bindings of every scope of one parsed module. `module` is its dotted name (for relative imports)."""

    def __init__(self, tree: ast.Module, module: str, *, is_package: bool = False) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.root = Scope(parent=None)
        self.scopes: dict[ScopeNode, Scope] = {}
        self._expression_scopes: dict[ExpressionScopeNode, Scope] = {}
        # Each class's methods with an instance parameter; what they assign to it is read on first need.
        self._methods: dict[Scope, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, Scope]]] = {}
        self._instance_sites: dict[Scope, dict[str, list[AttributeSite]]] = {}
        # Each class body's annotations without a value (`http: httpx.Client`, a dataclass field): they
        # bind no name, yet declare what the instances' attribute holds.
        self.class_annotations: dict[Scope, dict[str, ast.AnnAssign]] = {}
        # Whether an import met so far binds a name into a loop type's package: until one does, no annotation
        # can resolve to a loop type (most modules never import asyncio), and none needs resolving.
        self._imports_loop_package = False
        self._collect(tree.body, self.root)

    def scope_of(self, node: ScopeNode) -> Scope:
        """The scope of a function or class body (built by the pre-pass)."""
        return self.scopes[node]

    def expression_scope(self, node: ExpressionScopeNode, parent: Scope) -> Scope:
        """The scope of a lambda (its parameters) or a comprehension (its targets) met in `parent`. Built
        on first need, since the pre-pass reads no expressions, and then kept: every walker, and every
        table an analysis keys by scope, sees the same one."""
        scope = self._expression_scopes.get(node)
        if scope is None:
            if isinstance(node, ast.Lambda):
                scope = Scope(parent)
                for argument in arguments_of(node.args):
                    scope.bind(argument.arg, LOCAL, argument)
            else:
                scope = Scope(parent, is_comprehension=True)
                for generator in node.generators:
                    self._bind_targets(generator.target, scope, generator)
            self._expression_scopes[node] = scope
        return scope

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

    def resolve_all(self, node: ast.expr, scope: Scope, *, attributes: bool = False) -> list[str]:
        """Every dotted name `node` may refer to, one per combination of its names' candidate bindings
        (`resolve`'s answer among them); empty when none is known. A value that may be an event loop
        (`x or get_event_loop()`, `a if c else get_running_loop()`) is `LOOP`; with `attributes`, so is
        `self.<name>` in a method when the class assigns or annotates `<name>` as a loop."""
        if isinstance(node, ast.Name):
            return scope.lookup_all(node.id)
        if isinstance(node, ast.Attribute):
            own = self._instance_attribute(node, scope) if attributes else []
            bases = self.resolve_all(node.value, scope, attributes=attributes)
            return list(dict.fromkeys([*own, *(f"{base}.{node.attr}" for base in bases)]))
        if isinstance(node, ast.Call):
            made = (FACTORIES.get(called) for called in self.resolve_all(node.func, scope, attributes=attributes))
            return list(dict.fromkeys(kind for kind in made if kind is not None))
        if isinstance(node, ast.NamedExpr):
            return self.resolve_all(node.value, scope, attributes=attributes)
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            parts = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
            found = (self.resolve_all(part, scope, attributes=attributes) for part in parts)
            return [LOOP] if any(LOOP in candidates for candidates in found) else []
        return []

    def _instance_attribute(self, node: ast.Attribute, scope: Scope) -> list[str]:
        """`self.<name>` in a method: what the class's methods assign to it, or its class-body binding."""
        cls = self.instance_class(node.value, scope)
        if cls is None:
            return []
        if cls.attributes is None:
            cls.attributes = {
                name: list(dict.fromkeys(known for site in sites for known in self._site_targets(site)))
                for name, sites in self.instance_attributes(cls).items()
            }
        return list(dict.fromkeys([*cls.attributes.get(node.attr, []), *cls.targets(node.attr)]))

    @staticmethod
    def instance_class(node: ast.expr, scope: Scope) -> Scope | None:
        """The body of the class whose instance (or, in a class method, the class) `node` is: the first
        parameter of a method, not rebound; None for anything else."""
        if not isinstance(node, ast.Name):
            return None
        binder = scope.binder(node.id)
        if binder is None or binder.instance is None or binder.instance[0] != node.id:
            return None
        if binder.targets(node.id) or len(binder.sites_of(node.id)) > 1:
            return None  # the instance parameter rebound to something else
        return binder.instance[1]

    def _site_targets(self, site: AttributeSite) -> list[str]:
        known = self.resolve_all(site.value, site.scope) if site.value is not None else []
        if site.annotation is not None and self._names_loop_type(site.annotation, site.scope):
            known = [*known, LOOP]
        return known

    def instance_attributes(self, cls: Scope) -> dict[str, list[AttributeSite]]:
        """What the methods of the class whose body is `cls` assign to attributes of their instance
        parameter (`self.http = httpx.Client()`), by attribute, in source order; read on first need."""
        known = self._instance_sites.get(cls)
        if known is None:
            known = self._instance_sites[cls] = {}
            for method, scope in self._methods.get(cls, ()):
                self._collect_instance_attributes(method, scope, known)
        return known

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
                    scope.bind(alias.asname, alias.name, alias)
                else:
                    head = alias.name.partition(".")[0]
                    scope.bind(head, head, alias)
                self._imports_loop_package |= alias.name.partition(".")[0] in _LOOP_PACKAGES
        elif isinstance(statement, ast.ImportFrom):
            origin = self.absolute_module(statement.level, statement.module)
            for alias in statement.names:
                if alias.name != "*":
                    target = f"{origin}.{alias.name}" if origin else alias.name
                    scope.bind(alias.asname or alias.name, target, alias)
                    self._imports_loop_package |= target.partition(".")[0] in _LOOP_PACKAGES
        elif isinstance(statement, ast.Assign):
            self._bind_assignment(statement, statement.targets, statement.value, scope)
        elif isinstance(statement, ast.AnnAssign):
            if statement.value is not None:
                self._bind_assignment(statement, [statement.target], statement.value, scope)
            if isinstance(statement.target, ast.Name) and self._names_loop_type(statement.annotation, scope):
                scope.bind(statement.target.id, LOOP, statement)
            if statement.value is None and scope.is_class and isinstance(statement.target, ast.Name):
                self.class_annotations.setdefault(scope, {})[statement.target.id] = statement
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope.bind(statement.name, LOCAL, statement)
            inner = Scope(parent=scope)
            self.scopes[statement] = inner
            for argument in arguments_of(statement.args):
                loop_typed = argument.annotation is not None and self._names_loop_type(argument.annotation, scope)
                inner.bind(argument.arg, LOOP if loop_typed else LOCAL, argument)
            self._collect(statement.body, inner)
            if scope.is_class:
                self._method(statement, inner, scope)
        elif isinstance(statement, ast.ClassDef):
            scope.bind(statement.name, LOCAL, statement)
            inner = Scope(parent=scope, is_class=True)
            self.scopes[statement] = inner
            self._collect(statement.body, inner)
        elif isinstance(statement, (ast.Expr, ast.Return, ast.Pass, ast.AugAssign, ast.Raise, ast.Assert)):
            return
        elif isinstance(statement, (ast.Global, ast.Nonlocal)):
            scope.declare(statement.names, is_global=isinstance(statement, ast.Global))
        else:
            self._collect_compound(statement, scope)

    def _collect_compound(self, statement: ast.stmt, scope: Scope) -> None:
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            self._bind_targets(statement.target, scope, statement)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    self._bind_targets(item.optional_vars, scope, statement)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(statement, name, None)
            if block:
                self._collect(block, scope)
        for handler in getattr(statement, "handlers", ()):
            if handler.name:
                scope.bind(handler.name, LOCAL, handler)
            self._collect(handler.body, scope)
        for case in getattr(statement, "cases", ()):
            self._bind_targets(case.pattern, scope, case)
            self._collect(case.body, scope)

    def _method(self, method: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, cls: Scope) -> None:
        """Note a method's instance parameter; what it assigns to it is read on first need (most modules never
        ask, and reading every method's body would cost every parse)."""
        positional = [*method.args.posonlyargs, *method.args.args]
        is_static = any(isinstance(item, ast.Name) and item.id == "staticmethod" for item in method.decorator_list)
        if positional and not is_static:
            scope.instance = (positional[0].arg, cls)
            self._methods.setdefault(cls, []).append((method, scope))

    def _collect_instance_attributes(
        self, method: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, found: dict[str, list[AttributeSite]]
    ) -> None:
        """What a method assigns to `self.<name>` (its first parameter's attributes), for `instance_attributes`."""
        assert scope.instance is not None
        instance = scope.instance[0]
        # Assignments are statements: only what can hold one is read, in `ast.walk`'s order.
        for node in walk_statements(method):
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value, annotation = node.targets, node.value, None
            elif isinstance(node, ast.AnnAssign):
                targets, value, annotation = [node.target], node.value, node.annotation
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == instance:
                        found.setdefault(target.attr, []).append(AttributeSite(value, annotation, scope))
                elif isinstance(target, (ast.Tuple, ast.List)):
                    # Unpacked: the attribute is bound, to no value that can be read on its own.
                    for element in ast.walk(target):
                        if (
                            isinstance(element, ast.Attribute)
                            and isinstance(element.value, ast.Name)
                            and element.value.id == instance
                        ):
                            found.setdefault(element.attr, []).append(AttributeSite(None, None, scope))

    def _names_loop_type(self, annotation: ast.expr, scope: Scope) -> bool:
        # A name resolves into a package only through an import binding it (or a value assigned from one);
        # no factory makes a loop type.
        if not self._imports_loop_package:
            return False
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return False
        return any(
            isinstance(node, (ast.Name, ast.Attribute)) and self.resolve(node, scope) in LOOP_TYPES
            for node in ast.walk(annotation)
        )

    def _bind_assignment(self, statement: ast.stmt, targets: list[ast.expr], value: ast.expr, scope: Scope) -> None:
        followed = (ast.Name, ast.Attribute, ast.Call, ast.BoolOp, ast.IfExp)
        known = self.resolve_all(value, scope) if isinstance(value, followed) else []
        for target in targets:
            if isinstance(target, ast.Name):
                for target_name in known or [LOCAL]:
                    scope.bind(target.id, target_name, statement)
            else:
                self._bind_targets(target, scope, statement)

    def _bind_targets(self, target: ast.AST, scope: Scope, site: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                scope.bind(node.id, LOCAL, site)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                scope.bind(node.name, LOCAL, site)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                scope.bind(node.rest, LOCAL, site)


def parameter_default(arguments: ast.arguments, name: str) -> ast.expr | None:
    """The default value of the parameter `name` of a function's `arguments`, None when it has none."""
    positional = [*arguments.posonlyargs, *arguments.args]
    names = [parameter.arg for parameter in positional]
    if name in names:
        index = names.index(name) - (len(positional) - len(arguments.defaults))
        return arguments.defaults[index] if index >= 0 else None
    for parameter, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if parameter.arg == name:
            return default
    return None


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
