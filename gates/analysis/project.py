"""Which project functions a call runs: the call graph across functions, classes and modules, read on demand.

`ProjectFunctions.callees(call, scope, module)` names the function bodies a call runs when the gate can
tell which they are. It evaluates what the called expression stands for, through the scopes of `names.py`
and the modules of `modules.py`:

- a function: defined at module level, inside the calling function, or imported from another project
  module (`from x import f`, `import x` then `x.f()`, relative imports, re-exports through `__init__.py`);
- a method, looked up on the class through its project base classes (C3 order, at most `MAX_BASES` deep;
  a base outside the project that comes first in that order makes the method unknown), of
  - `self` / `cls` in a method of the class (`cls` is the class itself in a `@classmethod`),
  - a class named directly (`Mailer.build()`: static and class methods, or a plain function),
  - an instance: a name bound to `Mailer(...)`, a parameter or variable annotated `Mailer`,
    `Optional[Mailer]`, `Mailer | None` or `"Mailer"`, a module-level `mailer = Mailer()` of this or
    another module, an attribute the class's methods assign (`self.mailer = Mailer()`, or a parameter
    annotated `Mailer`) or its body annotates (`mailer: Mailer`, a dataclass or attrs field);
- a class: `Mailer(...)` runs its `__init__` (inherited ones too), an instance's call its `__call__`;
- `functools.partial(f, ...)` bound to a name and then called runs `f` (the callee keeps the partials it
  went through, `Callee.partials`, so a rule can read the arguments they bind).

A call of an `async def` or a generator function runs nothing where the coroutine or generator is only
made: `callees` leaves it out unless `runs_now.runs_body` says the call runs it there (awaited, iterated,
entered). At module level a name bound again by a later top-level `def`, `class` or import stands for
that binding only (`ModuleInfo.live_sites`: `def f` twice is the second); bindings under `if`/`try` after
it stay candidates.

A name bound several ways stands for every binding when each is known (`m = Mailer() if a else Sms()`
follows both); one unknown binding (an unannotated parameter, a value the gate cannot read, a `for`
target) makes the name unknown, and a name bound to a `def` and to anything else is unknown too. A method
called on `super()` (written in a method of a project class, or `super(Class, self)` naming one) is looked
up in the classes after that class in its method resolution order; as for `self`, the instance is taken to
be of that class, not of a subclass overriding the method further. `Base.method(self, ...)` is a function of
the class, followed as such. Nothing is guessed: an object of unknown type, a method found on no project
class (`super().save()` reaching a framework's base), a `@property`, a function's return value, `getattr`
and anything registered at run time have no callees. Neither has an
attribute of a class's attribute (`Order.objects.filter()`): the commonest call in a Django transaction,
it would cost the parse of every model's module for a manager whose methods are the framework's.

Each answer is memoised per `ProjectFunctions` (one per checked file). Other modules come from
`ProjectModules` and are parsed only when their bytes may bind the name asked for (`may_bind_value`), and
a class's bases only when the class itself does not bind the name looked up, so every module read is a
dependency of the checked file and a cached result is served only while those files are unchanged.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from corral.gates.analysis.modules import MAX_REEXPORTS, Dependency, ModuleInfo, ProjectModules
from corral.gates.analysis.names import Scope
from corral.gates.analysis.runs_now import runs_body
from corral.gates.source.prefilter import ends_word, starts_word

Function = ast.FunctionDef | ast.AsyncFunctionDef

# How many classes deep base classes are followed; how many names, attributes and modules one answer may
# pass through (deeper than any honest chain; also what stops a cycle).
MAX_BASES = 8
MAX_DEPTH = 24
PARTIALS = frozenset({"functools.partial"})
SUPER = "builtins.super"
# Bases that define none of a project class's methods or attributes.
NEUTRAL_BASES = frozenset(
    {"builtins.object", "abc.ABC"}
    | {f"{module}.{name}" for module in ("typing", "typing_extensions") for name in ("Generic", "Protocol")}
)
# Annotations that name the type of their first argument (`Optional` and `Union` name each of theirs).
_WRAPPING_ANNOTATIONS = frozenset(
    f"{module}.{name}" for module in ("typing", "typing_extensions") for name in ("Annotated", "ClassVar", "Final")
)
_UNION_ANNOTATIONS = frozenset(
    f"{module}.{name}" for module in ("typing", "typing_extensions") for name in ("Optional", "Union")
)
_PROPERTIES = frozenset({"property", "cached_property"})


class PartialSite(NamedTuple):
    """A `functools.partial(f, ...)` call on the way to a function: its arguments come before the call's, read
    in the scope and module where it stands."""

    call: ast.Call
    scope: Scope
    module: ModuleInfo


class Callee(NamedTuple):
    """A function body a call runs, the module it is in, and how a chain shows it (`notify`, `Mailer.send`);
    `partials`: the partials the call runs it through, innermost first (whose arguments bind first)."""

    function: Function
    module: ModuleInfo
    shown: str
    partials: tuple[PartialSite, ...] = ()


class ClassRef(NamedTuple):
    """A class the project defines, and its module."""

    node: ast.ClassDef
    module: ModuleInfo


@dataclass(frozen=True)
class _Function:
    """A function; a method shows as `Class.name`, any other function as the name the call site used."""

    function: Function
    module: ModuleInfo
    shown: str
    is_method: bool


@dataclass(frozen=True)
class _Class:
    """The class object itself."""

    ref: ClassRef


@dataclass(frozen=True)
class _Instance:
    """An instance of the class."""

    ref: ClassRef


@dataclass(frozen=True)
class _Partial:
    """`functools.partial(f, ...)`: calling it calls `f`, with the arguments given at `site`."""

    of: tuple[_Value, ...]
    site: PartialSite


@dataclass(frozen=True)
class _Module:
    module: ModuleInfo


@dataclass(frozen=True)
class _Super:
    """`super()` in a method of the class `after` (or `super(after, ...)`): its members are what the classes
    after `after` in the method resolution order of `after` bind."""

    after: ClassRef


_Value = _Function | _Class | _Instance | _Partial | _Module | _Super
# What an expression may stand for (each possibility), or None when the gate cannot tell.
_Values = tuple[_Value, ...] | None
# What an answer is memoised by: a dotted name, or a name in the scope that binds it.
_Key = TypeVar("_Key", str, tuple[Scope, str])
_T = TypeVar("_T")
# A class's bases in method resolution order: project classes, and the bases it cannot follow (by dotted name, or
# the expression when it has none).
_Order = list[ClassRef | ast.expr | str]


def may_bind_function(data: bytes, name: str) -> bool:
    """Whether a module's bytes may bind `name` to a function: a `def` of it or an import that may
    re-export it (the name on an import's line, or on a line of names continuing one). Most names a
    transaction's calls reach through modules are classes, exceptions and instances: their modules need
    no parse. Read at each place the name occurs as a whole word, so the search skips ahead to it."""
    word = name.encode("utf-8", "surrogatepass")
    position = data.find(word)
    while position != -1:
        end = position + len(word)
        if starts_word(data, position, after_dot=True) and ends_word(data, end):
            line_start = data.rfind(b"\n", 0, position) + 1
            line_end = data.find(b"\n", end)
            before = data[line_start:position]
            if (
                _follows_def(data, position)
                or _IMPORT_WORD.search(before) is not None
                or (
                    _NAMES_BEFORE.fullmatch(before) is not None
                    and _NAMES_AFTER.fullmatch(data, end, len(data) if line_end == -1 else line_end) is not None
                )
            ):
                return True
        position = data.find(word, position + 1)
    return False


# `import` as a word (after a dot too); a line of names (continuing an import) up to the name and after it, its
# line ending `\r\n` or `\n`.
_IMPORT_WORD = re.compile(rb"(?<![\w\x80-\xff])import(?![\w\x80-\xff])")
_NAMES_BEFORE = re.compile(rb"[ \t\r\w,(\\\x80-\xff]*")
_NAMES_AFTER = re.compile(rb"[ \t\r\w,)\\\x80-\xff]*(?:#[^\n]*)?")
_SPACING = frozenset(b" \t\n\r\f\v\\")


def _follows_def(data: bytes, position: int) -> bool:
    """Whether the word at `position` is the name of a `def` (across spaces and line continuations)."""
    start = position
    while start > 0 and data[start - 1] in _SPACING:
        start -= 1
    return start < position and data[start - 3 : start] == b"def" and starts_word(data, start - 3, after_dot=True)


def may_bind_value(data: bytes, name: str) -> bool:
    """Whether a module's bytes may bind `name` to anything a call can reach through: a function or a
    re-export (`may_bind_function`), a class, or an assignment or annotation of it (an instance, a
    partial). A module that only mentions the name needs no parse."""
    word = name.encode()
    position = data.find(word)
    while position != -1:
        if _names_class(data, position, position + len(word)) or _assigned_at(data, position, position + len(word)):
            return True
        position = data.find(word, position + 1)
    return may_bind_function(data, name)


# Read at each occurrence of the name, so the search skips ahead to it (a pattern starting with the name's
# context, `\bclass\s+NAME\b|^[ \t]*NAME[ \t]*(?::|=(?!=))`, is tried at every byte of the module): bytes regular
# expressions' word characters and white space.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_WHITE_BYTES = frozenset(b" \t\n\r\f\v")
_ASSIGNED = re.compile(rb"[ \t]*(?::|=(?!=))")


def _names_class(data: bytes, start: int, end: int) -> bool:
    """Whether `data[start:end]` is the name of a `class` statement: `class`, white space, the name, a word end."""
    before = start
    while before > 0 and data[before - 1] in _WHITE_BYTES:
        before -= 1
    keyword = before - 5
    if before == start or keyword < 0 or data[keyword:before] != b"class":
        return False
    if keyword > 0 and data[keyword - 1] in _WORD_BYTES:
        return False
    return (data[end - 1] in _WORD_BYTES) != (end < len(data) and data[end] in _WORD_BYTES)


def _assigned_at(data: bytes, start: int, end: int) -> bool:
    """Whether `data[start:end]` begins its line (after spaces and tabs) and is assigned or annotated there."""
    line_start = data.rfind(b"\n", 0, start) + 1
    if data[line_start:start].strip(b" \t"):
        return False
    return _ASSIGNED.match(data, end) is not None


def _decorator_names(function: Function) -> set[str]:
    """The last part of each decorator's name (`staticmethod`, `functools.cached_property`)."""
    found = set()
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Name):
            found.add(decorator.id)
        elif isinstance(decorator, ast.Attribute):
            found.add(decorator.attr)
    return found


def _merge(orders: list[_Order]) -> _Order | None:
    """The C3 merge of base classes' orders; None when they admit none (Python refuses such a class)."""
    merged: _Order = []
    pending = [list(order) for order in orders if order]
    while pending:
        for order in pending:
            head = order[0]
            if not any(head in other[1:] for other in pending):
                break
        else:
            return None
        merged.append(head)
        pending = [[entry for entry in order if entry != head] for order in pending]
        pending = [order for order in pending if order]
    return merged


class ProjectFunctions:
    """The project's functions and classes as one checked file's calls reach them (modules read through
    `project`)."""

    def __init__(self, project: ProjectModules) -> None:
        self.project = project
        self._classes: dict[ModuleInfo, dict[Scope, ClassRef]] = {}
        # Each memoised answer keeps the files its evaluation read: served again (to a later walk of the same
        # checked file, whose answer may be kept for other files), it records them again.
        self._names: dict[tuple[Scope, str], tuple[_Values, dict[str, Dependency]]] = {}
        self._dotted: dict[str, tuple[_Values, dict[str, Dependency]]] = {}
        self._orders: dict[ast.ClassDef, tuple[_Order | None, dict[str, Dependency]]] = {}
        # What is being evaluated: met again, it is a cycle, which adds nothing, and answers that depended
        # on a cut cycle are not memoised.
        self._pending: set[object] = set()
        self._cut = False
        self._depth = 0
        self._modules_deep = 0

    def callees(self, call: ast.Call, scope: Scope, module: ModuleInfo, *, runs_now: bool = True) -> list[Callee]:
        """The function bodies `call`, met in `scope` of `module`, runs there; empty when the gate cannot tell.
        Without `runs_now`, the functions it calls whether or not their bodies run there (a `@contextmanager`
        function called to decorate, whose body runs around the decorated one)."""
        func = call.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        found: list[Callee] = []
        for callee, own_name in self._called(self._expression(func, scope, module) or ()):
            if runs_now and not runs_body(call, callee.function, scope, module):
                continue  # a coroutine not awaited, a generator not iterated: its body runs later, if ever
            if called is not None and not own_name:
                # A chain shows the name the call site used, whatever module it was re-exported through.
                callee = callee._replace(shown=called)
            if callee not in found:
                found.append(callee)
        return found

    def _called(self, values: Iterable[_Value], depth: int = 0) -> list[tuple[Callee, bool]]:
        """The bodies calling each of `values` runs, each with whether it keeps its own name in a chain (a
        method shows with its class, the function of a partial as itself)."""
        found: list[tuple[Callee, bool]] = []
        for value in values:
            if isinstance(value, _Function):
                found.append((Callee(value.function, value.module, value.shown), value.is_method or depth > 0))
            elif isinstance(value, (_Class, _Instance)) and depth < MAX_DEPTH:
                # Building an instance runs `__init__`; calling one runs `__call__`.
                special = "__init__" if isinstance(value, _Class) else "__call__"
                member = self._class_member(value.ref, special)
                found.extend(self._called(member or (), depth + 1))
            elif isinstance(value, _Partial) and depth < MAX_DEPTH:
                found.extend(
                    (callee._replace(partials=(*callee.partials, value.site)), own)
                    for callee, own in self._called(value.of, depth + 1)
                )
        return found

    # -- what an expression stands for -----------------------------------------------------------

    def _expression(self, node: ast.expr, scope: Scope, module: ModuleInfo) -> _Values:
        if isinstance(node, ast.Name):
            return self._name(node.id, scope, module)
        if isinstance(node, ast.Attribute):
            dotted = module.names.resolve(node, scope)
            if dotted is not None:
                return self._at(dotted)
            owners = self._expression(node.value, scope, module)
            return None if owners is None else self._union(self._member(owner, node.attr) for owner in owners)
        if isinstance(node, ast.Call):
            return self._made(node, scope, module)
        if isinstance(node, ast.Constant) and node.value is None:
            return ()
        if isinstance(node, ast.NamedExpr):
            return self._expression(node.value, scope, module)
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            parts = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
            return self._union(self._expression(part, scope, module) for part in parts)
        return None

    def _made(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> _Values:
        """What a call returns, when the gate knows: an instance of the class called, a partial, or `super()`."""
        made = module.names.resolve(call.func, scope)
        if made == SUPER:
            return self._super(call, scope, module)
        if made in PARTIALS:
            if not call.args or isinstance(call.args[0], ast.Starred):
                return None
            wrapped = self._expression(call.args[0], scope, module)
            return None if wrapped is None else (_Partial(wrapped, PartialSite(call, scope, module)),)
        called = self._expression(call.func, scope, module)
        if called is None or not called or not all(isinstance(value, _Class) for value in called):
            return None
        return tuple(_Instance(value.ref) for value in called if isinstance(value, _Class))

    def _super(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> _Values:
        """`super()` written in a method of a project class, or `super(Class, ...)` naming one: the class whose
        bases it looks members up in. The instance is taken to be of that class itself, as for `self`."""
        if not call.args and not call.keywords:
            own = self._method_class(scope, module) if scope.instance is not None else None
            return None if own is None else (_Super(own[0]),)
        if len(call.args) != 2 or call.keywords:
            return None
        named = self._expression(call.args[0], scope, module)
        if named is None or len(named) != 1 or not isinstance(named[0], _Class):
            return None
        return (_Super(named[0].ref),)

    def _annotation(self, node: ast.expr, scope: Scope, module: ModuleInfo) -> _Values:
        """The instances an annotation says a value is (`Mailer`, `Optional[Mailer]`, `Mailer | None`,
        `"Mailer"`); None for any other type."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return None
        if isinstance(node, ast.Constant) and node.value is None:
            return ()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union(self._annotation(part, scope, module) for part in (node.left, node.right))
        if isinstance(node, ast.Subscript):
            wrapper = module.names.resolve(node.value, scope)
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if wrapper in _UNION_ANNOTATIONS:
                return self._union(self._annotation(element, scope, module) for element in elements)
            if wrapper in _WRAPPING_ANNOTATIONS and elements:
                return self._annotation(elements[0], scope, module)
            return None
        if isinstance(node, (ast.Name, ast.Attribute)):
            named = self._expression(node, scope, module)
            if not named or not all(isinstance(value, _Class) for value in named):
                return None
            return tuple(_Instance(value.ref) for value in named if isinstance(value, _Class))
        return None

    def _name(self, name: str, scope: Scope, module: ModuleInfo) -> _Values:
        """What `name` stands for in `scope`: every binding the scope model says it sees."""
        binder = scope.binder(name)
        if binder is None:
            return None
        key = (binder, name)
        if key in self._names:
            return self._served(self._names[key])
        return self._evaluated(key, lambda: self._bindings(name, binder, module), self._names)

    def _bindings(self, name: str, binder: Scope, module: ModuleInfo) -> _Values:
        # At module level, what an unconditional top-level statement rebinds no longer counts.
        sites = module.live_sites(name) if binder is module.names.root else binder.sites_of(name)
        if not sites:
            return None
        if binder.instance is not None and binder.instance[0] == name:
            # The instance (or, in a class method, the class) a method is called on, unless rebound.
            own = self._method_class(binder, module)
            if own is None or len(sites) > 1:
                return None
            return (_Class(own[0]) if own[1] else _Instance(own[0]),)
        functions = [site for site in sites if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if functions and len(functions) != len(sites):
            return None  # a `def` rebound to anything else has no one value
        parts: list[_Values] = []
        if any(isinstance(site, ast.alias) for site in sites):
            targets = binder.targets(name)
            parts.extend(self._at(target) for target in targets)
        for site in sites:
            if not isinstance(site, ast.alias):
                parts.append(self._site(site, name, binder, module))
        return self._union(parts)

    def _site(self, site: ast.AST, name: str, scope: Scope, module: ModuleInfo) -> _Values:
        """What one binding of `name` in `scope` binds it to."""
        if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if scope is module.names.root and site not in module.bindings.get(name, ()):
                return None  # defined under `if TYPE_CHECKING:`: it never runs
            return (_Function(site, module, site.name, is_method=False),)
        if isinstance(site, ast.ClassDef):
            return (_Class(ClassRef(site, module)),)
        if isinstance(site, ast.arg):
            # Read where the function is defined.
            defined_in = scope.parent or scope
            return None if site.annotation is None else self._annotation(site.annotation, defined_in, module)
        if isinstance(site, ast.Assign):
            if not any(isinstance(target, ast.Name) and target.id == name for target in site.targets):
                return None  # unpacked
            return self._expression(site.value, scope, module)
        if isinstance(site, ast.AnnAssign):
            declared = self._annotation(site.annotation, scope, module)
            if declared is None and site.value is not None:
                return self._expression(site.value, scope, module)
            return declared
        return None

    def _at(self, dotted: str) -> _Values:
        """What the dotted name of something in a project module stands for (a module, or a member of one)."""
        if dotted in self._dotted:
            return self._served(self._dotted[dotted])
        if self._modules_deep >= MAX_REEXPORTS:
            # Re-exported through more modules than honest code does (a cycle of re-exports, say).
            self._cut = True
            return None
        self._modules_deep += 1
        try:
            return self._evaluated(dotted, lambda: self._located(dotted), self._dotted)
        finally:
            self._modules_deep -= 1

    def _located(self, dotted: str) -> _Values:
        owner, _, name = dotted.rpartition(".")
        if not owner:
            found = self.project.module(dotted)
            return None if found is None else (_Module(found),)
        data = self.project.source(owner)
        if data is None:
            # Not a module: a member of something a module binds (`app.mail.Mailer.build`, `app.mail.mailer.send`).
            # One level only: an attribute of a class's attribute (`Order.objects.filter`, the commonest
            # call in a transaction) would cost the parse of the class's module and its bases for nothing.
            if self.project.source(owner.rpartition(".")[0]) is None:
                return None
            owners = self._at(owner)
            return None if owners is None else self._union(self._member(value, name) for value in owners)
        if may_bind_value(data, name):
            module = self.project.module(owner)
            return None if module is None else self._name(name, module.names.root, module)
        submodule = self.project.module(dotted)
        return None if submodule is None else (_Module(submodule),)

    def _served(self, memoised: tuple[_T, dict[str, Dependency]]) -> _T:
        """A memoised answer, the files its evaluation read recorded again."""
        found, read = memoised
        self.project.replay(read)
        return found

    def _evaluated(
        self, key: _Key, evaluate: Callable[[], _Values], memo: dict[_Key, tuple[_Values, dict[str, Dependency]]]
    ) -> _Values:
        """`evaluate()`, memoised in `memo` unless it met a cycle or the depth bound on the way."""
        if key in self._pending or self._depth >= MAX_DEPTH:
            self._cut = True
            return () if key in self._pending else None
        outer_cut, self._cut = self._cut, False
        self._pending.add(key)
        self._depth += 1
        try:
            with self.project.recording() as read:
                found = evaluate()
        finally:
            self._pending.discard(key)
            self._depth -= 1
        if not self._cut:
            memo[key] = (found, read)
        self._cut = self._cut or outer_cut
        return found

    @staticmethod
    def _union(parts: Iterable[_Values]) -> _Values:
        """Every possibility of each part, or None as soon as one part is unknown."""
        found: list[_Value] = []
        for part in parts:
            if part is None:
                return None
            found.extend(value for value in part if value not in found)
        return tuple(found)

    # -- classes -----------------------------------------------------------------------------------

    def _method_class(self, method: Scope, module: ModuleInfo) -> tuple[ClassRef, bool] | None:
        """The class a method's scope belongs to, and whether its first parameter is the class (`@classmethod`)."""
        assert method.instance is not None
        classes = self._classes.get(module)
        if classes is None:
            classes = self._classes[module] = {
                scope: ClassRef(node, module)
                for node, scope in module.names.scopes.items()
                if isinstance(node, ast.ClassDef)
            }
        ref = classes.get(method.instance[1])
        if ref is None:
            return None
        for statement in ref.node.body:
            if (
                isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                and module.names.scopes.get(statement) is method
            ):
                return ref, "classmethod" in _decorator_names(statement)
        return ref, False

    def _order(self, ref: ClassRef, depth: int = 0) -> _Order | None:
        """The class and its bases in method resolution order (C3); None when it cannot be had."""
        if ref.node in self._orders:
            return self._served(self._orders[ref.node])
        if depth > MAX_BASES or ref.node in self._pending:
            return None
        self._pending.add(ref.node)
        try:
            with self.project.recording() as read:
                order = self._linearized(ref, depth)
        finally:
            self._pending.discard(ref.node)
        self._orders[ref.node] = (order, read)
        return order

    def _linearized(self, ref: ClassRef, depth: int) -> _Order | None:
        names = ref.module.names
        # Bases are read where the class statement runs.
        defined_in = names.scopes[ref.node].parent or names.root
        bases: _Order = []
        for base in ref.node.bases:
            expression = base.value if isinstance(base, ast.Subscript) else base
            dotted = names.resolve(expression, defined_in)
            if dotted in NEUTRAL_BASES:
                continue
            found = self._expression(expression, defined_in, ref.module)
            if found is not None and len(found) == 1 and isinstance(found[0], _Class):
                bases.append(found[0].ref)
            else:
                # Not a project class: what it defines is unknown. It is the same base wherever it is written
                # (`models.Model` in two class statements), so it is known by its name when it has one: C3
                # then orders it as Python does, instead of finding no order.
                bases.append(dotted or base)
        orders: list[_Order] = []
        for entry in bases:
            inherited: _Order | None = self._order(entry, depth + 1) if isinstance(entry, ClassRef) else [entry]
            if inherited is None:
                return None
            orders.append(inherited)
        merged = _merge([*orders, bases])
        return None if merged is None else [ref, *merged]

    def _member(self, owner: _Value, name: str) -> _Values:
        """What `owner.name` stands for."""
        if isinstance(owner, _Module):
            root = owner.module.names.root
            if name in root.bindings:
                return self._name(name, root, owner.module)
            return self._at(f"{owner.module.names.module}.{name}")
        if isinstance(owner, _Class):
            return self._class_member(owner.ref, name)
        if isinstance(owner, _Instance):
            return self._instance_member(owner.ref, name)
        if isinstance(owner, _Super):
            return self._base_member(owner.after, name)
        return None

    def _base_member(self, ref: ClassRef, name: str) -> _Values:
        """What the first class after `ref` in its method resolution order that binds `name` binds it to."""
        order = self._order(ref)
        if order is None:
            return None
        for entry in order[1:]:
            if not isinstance(entry, ClassRef):
                return None  # a base the gate cannot read may define it
            if self._binds(entry, name):
                return self._own_member(entry, name)
        return None

    def _class_member(self, ref: ClassRef, name: str) -> _Values:
        """`Class.name`: what the first class in the method resolution order that binds it binds it to."""
        if self._binds(ref, name):
            return self._own_member(ref, name)  # the bases (and their modules) need not be read
        return self._base_member(ref, name)

    @staticmethod
    def _binds(ref: ClassRef, name: str) -> bool:
        names = ref.module.names
        body = names.scopes[ref.node]
        return name in body.bindings or name in names.class_annotations.get(body, {})

    def _own_member(self, ref: ClassRef, name: str) -> _Values:
        """What the body of the class binds `name` to (`_binds` says it does)."""
        names = ref.module.names
        body = names.scopes[ref.node]
        sites = body.sites_of(name)
        annotated = names.class_annotations.get(body, {}).get(name)
        if not sites:
            return None if annotated is None else self._annotation(annotated.annotation, body, ref.module)
        parts: list[_Values] = []
        for site in sites:
            if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _PROPERTIES & _decorator_names(site):
                    return None  # what it returns is not known
                parts.append((_Function(site, ref.module, f"{ref.node.name}.{name}", is_method=True),))
            elif isinstance(site, (ast.Assign, ast.AnnAssign, ast.ClassDef)):
                parts.append(self._site(site, name, body, ref.module))
            else:
                return None
        functions = [site for site in sites if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if functions and len(functions) != len(sites):
            return None
        return self._union(parts)

    def _instance_member(self, ref: ClassRef, name: str) -> _Values:
        """`instance.name`, decided by the class itself when its body or methods bind the name, else by
        its bases (their modules are read only then)."""
        if self._binds(ref, name) or name in ref.module.names.instance_attributes(ref.module.names.scopes[ref.node]):
            return self._instance_member_in([ref], ref, name)
        order = self._order(ref)
        if order is None:
            return None
        return self._instance_member_in([entry for entry in order if isinstance(entry, ClassRef)], ref, name)

    def _instance_member_in(self, classes: list[ClassRef], ref: ClassRef, name: str) -> _Values:
        """`instance.name` as `classes` say: the type one annotates it with, else what their methods assign
        to `self.name`, else the class attribute (a method, bound)."""
        for entry in classes:
            names = entry.module.names
            body = names.scopes[entry.node]
            annotated = names.class_annotations.get(body, {}).get(name)
            if annotated is None:
                annotated = next((site for site in body.sites_of(name) if isinstance(site, ast.AnnAssign)), None)
            if annotated is not None:
                declared = self._annotation(annotated.annotation, body, entry.module)
                if declared is not None:
                    return declared
        assigned: list[_Values] = []
        for entry in classes:
            for site in entry.module.names.instance_attributes(entry.module.names.scopes[entry.node]).get(name, []):
                if site.annotation is not None:
                    assigned.append(self._annotation(site.annotation, site.scope, entry.module))
                elif site.value is not None:
                    assigned.append(self._expression(site.value, site.scope, entry.module))
                else:
                    return None
        if not assigned:
            return self._class_member(ref, name)
        found = self._union(assigned)
        # An instance's own attribute hides the class's, so a class-level default (`mailer = None`) adds to
        # it only when it is known.
        default = self._class_member(ref, name)
        if found is None or default is None:
            return found
        return self._union([found, tuple(value for value in default if not isinstance(value, _Function))])
