"""What opens a database transaction: the APIs, the project's own wrappers of them, and the pre-pass that
names those wrappers for the prefilter.

An API opens one when used as a context manager (or decorator): Django's `transaction.atomic` (however
imported), and `.begin()`, `.begin_nested()`, `.transaction()` or `.atomic()` on any object.

A name or `self.<attribute>` entered as a `with` item opens the transaction of the calls it holds when every
binding of it is one that opens a transaction (`tx = transaction.atomic()`, module-level or local; `self.tx`
assigned only such calls by the class's methods or body); `held_opener_names` tells the rule which lines
outside a transaction may use one.

A project wrapper is a transaction scope where it is used (`TransactionScopes.opened_by`):

- a function decorated with `contextlib.contextmanager`/`asynccontextmanager` whose every `yield` stands
  inside a transaction scope (an API above or another project wrapper, transitively), at `with f(...):`
  and, as contextlib allows, at `@f(...)`;
- a class whose `__enter__`/`__aenter__` always enters a transaction itself (a statement of its body calls
  `x.__enter__()` on an opener's call, on a local or on a `self.<attribute>` the class only ever assigns
  one), at `with C(...):`;
- a decorator function whose every `return` hands back either an opener applied to the decorated
  function (`transaction.atomic(func)`) or a function defined in it that calls the decorated function
  only inside a transaction scope; `@d(...)` when `d` returns such a decorator;
- a plain function whose every `return` hands back a call that opens one (`return transaction.atomic(using=
  using)`, or another such wrapper's call), at `with f(...):` and, as Django's atomic allows, at `@f(...)`.

A wrapper that passes its own parameter on as the database alias (`atomic(using=using)`) opens the
transaction on the alias each use passes (`Transaction.alias_parameter`, bound by `_alias_passed`), else on
the parameter's default.

Wrappers are found through the calls `corral.gates.analysis.project` resolves (same module, imported,
re-exported) and classes looked up the same way; every module read is a dependency of the checked file.
A wrapper that also yields, calls or returns outside a transaction is not one (the body may then run
outside it), nor is anything reached through an object of unknown type, an `ExitStack`, or code behind
`if TYPE_CHECKING:`.

`wrapper_words(root)`, a byte-level pre-pass over the project (read through `ProjectModules.summary`, so
once per run and per process, and recorded as a dependency), names every definition that may be such a
wrapper and every name it is re-exported as: a file that opens no transaction itself but uses one of them
is not ruled out by the prefilter.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import NamedTuple

from corral.gates.analysis.modules import MAX_REEXPORTS, ModuleInfo, ProjectModules
from corral.gates.analysis.names import LOCAL, ModuleNames, Scope, is_type_checking_test, parameter_default
from corral.gates.analysis.project import Callee, Function, ProjectFunctions
from corral.gates.config import DEFAULT_MAX_FILE_SIZE
from corral.gates.source.parsing import Uncheckable, read_source
from corral.gates.source.prefilter import LINES_AT_MOST, Lines, name_before, starts_word

DJANGO_ATOMIC = "django.db.transaction.atomic"
# Django's adapter of a function decorator to methods: on a method, or on a class with `name=` the method.
METHOD_DECORATOR = "django.utils.decorators.method_decorator"
# Methods that open a transaction when used as a context manager (or decorator), whatever the object.
OPENERS = frozenset({"begin", "begin_nested", "transaction", "atomic"})
CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
ENTER_METHODS = ("__enter__", "__aenter__")
# The summary `ProjectModules.summary` computes with `wrapper_words`.
WRAPPER_WORDS = f"{__name__}:wrapper_words"

# Every scope names Django's `atomic` as a whole word (in the call, the decorator or the import binding
# an alias to it), or an opener as an attribute: after a dot, across spaces, continuations and comments
# (`names_opener`). Two patterns, each starting with a literal the engine skips ahead to: one pattern of
# both tried a match at every position (76 ms against 20 over saleor's 597 files naming the words).
_ATOMIC = re.compile(rb"atomic\b")
_OPENER_ATTRIBUTE = re.compile(rb"\.(?:\s|\\|#[^\n]*(?![^\n]))*(?:atomic|begin|begin_nested|transaction)\b")
# What a regular expression's `\b` takes for a word's bytes.
_ASCII_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# What a file defining a wrapper holds besides what the wrapper opens: a context manager's decorator or
# method, or a decorator's `return` of a function it defines (a name a `def` binds) or of an opener.
_CONTEXT_MANAGER_SHAPE = re.compile(rb"contextmanager|__a?enter__")
_SKIPPED = rb"(?:[\s(\\]|#[^\n]*(?![^\n]))*"
# Patterns start with their literal word (a look-behind would stop the engine skipping ahead to it): the
# callers test that the word starts there.
_RETURNED_NAME = re.compile(rb"return" + _SKIPPED + rb"([A-Za-z_]\w*)(?:[\s);\\]|#[^\n]*(?![^\n]))*$", re.MULTILINE)
_DEFINED_NAME = re.compile(rb"\bdef(?:\s|\\)+([A-Za-z_]\w*)")
_DOTTED = rb"(?:\w+(?:[\s\\]|#[^\n]*(?![^\n]))*\.(?:[\s\\]|#[^\n]*(?![^\n]))*)*"


def names_opener(data: bytes) -> bool:
    """Whether `data` names an opener as a scope would: `atomic` as a whole word, or `.atomic`, `.begin`,
    `.begin_nested`, `.transaction` as an attribute."""
    if b"atomic" in data:
        for found in _ATOMIC.finditer(data):
            if found.start() == 0 or data[found.start() - 1] not in _ASCII_WORD:
                return True
    return (b"atomic" in data or b"begin" in data or b"transaction" in data) and _OPENER_ATTRIBUTE.search(
        data
    ) is not None


def names_any(data: bytes, words: frozenset[str]) -> bool:
    """Whether `data` names one of `words` as a whole word (the substring tests rule out most files far
    faster than the pattern)."""
    return any(word.encode() in data for word in words) and wrapper_pattern(words).search(data) is not None


class Transaction(NamedTuple):
    """An open transaction scope as shown in messages (`transaction.atomic()`, `@db.atomic()`,
    `db_transaction() (app/db.py:12: transaction.atomic())`), whether Django's atomic opens it, and the database
    alias it opens it on as written (`"orders"`, `settings.REPLICA_NAME`) when that is not the default one:
    `on_commit` without a matching `using=` waits for the default connection's commit, not for this one."""

    shown: str
    django: bool
    alias: str | None = None
    # The parameter of the wrapper being judged that the alias is (`atomic(using=using)`), read at each use.
    alias_parameter: str | None = None


class TransactionScopes:
    """What opens a transaction, seen from one checked file (wrappers in other modules read on demand)."""

    def __init__(self, functions: ProjectFunctions) -> None:
        self.functions = functions
        self.project = functions.project
        # By definition, and by (definition, "factory") for what a decorator factory returns.
        self._known: dict[object, Transaction | None] = {}
        self._walking: set[object] = set()

    def opened_by(
        self, expression: ast.expr, scope: Scope, module: ModuleInfo, *, decorator: bool
    ) -> Transaction | None:
        """The transaction `expression` opens as a `with` item (or, with `decorator`, as a decorator)."""
        if not decorator and isinstance(expression, (ast.Name, ast.Attribute)):
            # What a name or `self.<attribute>` is known to hold decides, before what its spelling suggests.
            held = self._held(expression, scope, module)
            if held is not None:
                return held
        opened = direct_opener(expression, scope, module, decorator=decorator)
        if opened is not None:
            return opened
        if decorator and _adapted(expression, scope, module) is not None:
            return self._method_decorator(expression, scope, module) if not _keyword(expression, "name") else None
        shown = ast.unparse(expression.func if isinstance(expression, ast.Call) else expression)
        if isinstance(expression, ast.Call):
            shown += "(...)" if expression.args or expression.keywords else "()"
            for callee in self.functions.callees(expression, scope, module, runs_now=False):
                inner = self._remembered(callee.function, partial(self._context_manager, callee))
                if inner is None:
                    inner = self._remembered((callee.function, "returns"), partial(self._returned_opener, callee))
                if inner is None and decorator:
                    inner = self._remembered((callee.function, "factory"), partial(self._decorator_factory, callee))
                if inner is not None:
                    return _via(shown, _alias_passed(inner, expression, callee, scope), decorator=decorator)
            if not decorator:
                for cls, defined_in in self._classes(expression.func, scope, module):
                    inner = self._remembered(cls, partial(self._entered, cls, defined_in))
                    if inner is not None:
                        return _via(shown, inner, decorator=False)
            return None
        if decorator:
            call = ast.Call(func=expression, args=[], keywords=[])
            for callee in self.functions.callees(call, scope, module, runs_now=False):
                inner = self._remembered(callee.function, partial(self._decorator, callee.function, callee.module))
                if inner is not None:
                    return _via(shown, inner, decorator=True)
        return None

    def _held(self, expression: ast.Name | ast.Attribute, scope: Scope, module: ModuleInfo) -> Transaction | None:
        """`with tx:` where `tx = transaction.atomic()` (module-level or local), or `with self.tx:` where the
        class assigns `self.tx` (or binds `tx` in its body) only such calls: the transaction the value opens, when
        every binding of it is a call that opens one."""
        values = _held_values(expression, scope, module)
        if not values:
            return None
        found: Transaction | None = None
        for value, at in values:
            opened = self.opened_by(value, at, module, decorator=False)
            if opened is None:
                return None
            found = found or opened._replace(
                shown=f"{ast.unparse(expression)} ({module.relpath}:{value.lineno}: {opened.shown})"
            )
        return found

    def methods_opened_by(self, cls: ast.ClassDef, scope: Scope, module: ModuleInfo) -> dict[str, Transaction]:
        """The methods of `cls` its `@method_decorator(<opener>, name="<method>")` decorators run inside a
        transaction, by name (`scope` is where the class is defined)."""
        methods: dict[str, Transaction] = {}
        for decorator in cls.decorator_list:
            name = _keyword(decorator, "name")
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                opened = self._method_decorator(decorator, scope, module)
                if opened is not None:
                    methods.setdefault(name.value, opened)
        return methods

    def _method_decorator(self, expression: ast.expr, scope: Scope, module: ModuleInfo) -> Transaction | None:
        """The transaction `method_decorator(<decorator or list of them>, ...)` runs the method in, if any."""
        adapted = _adapted(expression, scope, module)
        decorators = adapted.elts if isinstance(adapted, (ast.List, ast.Tuple)) else [adapted] if adapted else []
        for decorator in decorators:
            opened = self.opened_by(decorator, scope, module, decorator=True)
            if opened is not None:
                return opened._replace(shown=f"@{ast.unparse(expression)}")
        return None

    def _remembered(self, node: object, compute: Callable[[], Transaction | None]) -> Transaction | None:
        """`compute()` once per definition; a definition met again while it is being judged (a cycle) opens
        nothing there."""
        if node in self._known:
            return self._known[node]
        if node in self._walking:
            return None
        self._walking.add(node)
        try:
            found = compute()
        finally:
            self._walking.discard(node)
        self._known[node] = found
        return found

    # -- context manager functions --------------------------------------------------------------------

    def _context_manager(self, callee: Callee) -> Transaction | None:
        function, module = callee.function, callee.module
        defined_in = module.names.scope_of(function).parent
        if defined_in is None or not any(
            module.names.resolve(decorator, defined_in) in CONTEXT_MANAGERS for decorator in function.decorator_list
        ):
            return None
        return _every_one_inside(list(self._inside(function, module, _is_yield)))

    def _returned_opener(self, callee: Callee) -> Transaction | None:
        """A plain function whose every `return` hands back an opener's call (`return transaction.atomic(using=
        using)`, or another such wrapper's): what it returns is entered (or, as Django's atomic allows, decorates)
        where it is used."""
        function, module = callee.function, callee.module
        scope = module.names.scope_of(function)
        found: Transaction | None = None
        returns = list(_returns(function.body))
        if not returns:
            return None
        for returned in returns:
            if not isinstance(returned.value, ast.Call):
                return None
            opened = self.opened_by(returned.value, scope, module, decorator=False)
            if opened is None:
                return None
            found = found or opened._replace(shown=f"{module.relpath}:{returned.lineno}: {opened.shown}")
        return found

    def _decorator_factory(self, callee: Callee) -> Transaction | None:
        """`@factory(...)`: the transaction of the decorator `factory` returns (a function defined in it)."""
        returned = _returned_functions(callee.function)
        return None if returned is None else self._decorator_of_all(returned, callee.module)

    # -- decorators -----------------------------------------------------------------------------------

    def _decorator(self, function: Function, module: ModuleInfo) -> Transaction | None:
        """What a decorator wraps the decorated function in, when every `return` of it says so."""
        positional = [*function.args.posonlyargs, *function.args.args]
        if len(positional) != 1:
            return None
        decorated = positional[0].arg
        scope = module.names.scope_of(function)
        found: Transaction | None = None
        returns = list(_returns(function.body))
        for returned in returns:
            value = returned.value
            opened: Transaction | None = None
            if (
                isinstance(value, ast.Call)
                and len(value.args) == 1
                and not value.keywords
                and isinstance(value.args[0], ast.Name)
                and value.args[0].id == decorated
            ):
                # `return transaction.atomic(func)`, `return db.atomic()(func)`: the opener spelled by its
                # own name or a wrapper's, as the pre-pass reads a `return` (not through an alias of atomic).
                aliased = _innermost_name(value.func) not in OPENERS
                if not (aliased and direct_opener(value.func, scope, module, decorator=True)):
                    opened = self.opened_by(value.func, scope, module, decorator=True)
                if opened is not None:
                    opened = opened._replace(shown=f"{module.relpath}:{value.lineno}: {opened.shown}")
            elif isinstance(value, ast.Name):
                inner = _nested_function(function, value.id)
                if inner is not None:
                    opened = self._wraps_calls(inner, decorated, scope, module)
            if opened is None:
                return None
            found = found or opened
        return found

    def _decorator_of_all(self, functions: list[Function], module: ModuleInfo) -> Transaction | None:
        found = [self._decorator(function, module) for function in functions]
        return found[0] if found and all(found) else None

    def _wraps_calls(self, wrapper: Function, decorated: str, outer: Scope, module: ModuleInfo) -> Transaction | None:
        """The transaction every call of the decorated function inside `wrapper` runs in."""
        own = [opened for d in wrapper.decorator_list if (opened := self.opened_by(d, outer, module, decorator=True))]
        if own:
            # `@transaction.atomic def wrapper(...)`: its whole body runs inside.
            decorator = own[0]
            where = wrapper.decorator_list[0].lineno
            return decorator._replace(shown=f"{module.relpath}:{where}: {decorator.shown}")

        def calls_decorated(node: ast.AST, at: Scope) -> bool:
            return (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == decorated
                and at.binder(decorated) is outer
            )

        return _every_one_inside(list(self._inside(wrapper, module, calls_decorated)))

    # -- classes --------------------------------------------------------------------------------------

    def _classes(self, func: ast.expr, scope: Scope, module: ModuleInfo) -> list[tuple[ast.ClassDef, ModuleInfo]]:
        """The project classes `func` names (defined in the module, imported or re-exported)."""
        if isinstance(func, ast.Name):
            binder = scope.binder(func.id)
            if binder is None:
                return []
            target = binder.bindings[func.id]
            if target != LOCAL:
                return self._imported_classes(target, 0)
            sites = module.bindings.get(func.id, []) if binder is module.names.root else binder.sites_of(func.id)
            return _only_classes(sites, module)
        if isinstance(func, ast.Attribute):
            dotted = module.names.resolve(func, scope)
            if dotted is not None:
                return self._imported_classes(dotted, 0)
        return []

    def _imported_classes(self, dotted: str, reexports: int) -> list[tuple[ast.ClassDef, ModuleInfo]]:
        owner, _, name = dotted.rpartition(".")
        if not owner or reexports > MAX_REEXPORTS:
            return []
        data = self.project.source(owner)
        if data is None or name.encode() not in data:
            return []
        module = self.project.module(owner)
        if module is None:
            return []
        sites = module.bindings.get(name, [])
        if len(sites) == 1 and isinstance(sites[0], ast.ImportFrom):
            target = module.names.root.lookup(name)
            return self._imported_classes(target, reexports + 1) if target is not None else []
        return _only_classes(sites, module)

    def _entered(self, cls: ast.ClassDef, module: ModuleInfo) -> Transaction | None:
        """The transaction a class's `__enter__`/`__aenter__` always enters itself: a statement of its body
        (not under an `if` or a `try`) calls `__enter__`/`__aenter__` on what can only be an opener."""
        methods = [
            statement for statement in cls.body if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for method in methods:
            if method.name not in ENTER_METHODS:
                continue
            scope = module.names.scope_of(method)
            positional = [*method.args.posonlyargs, *method.args.args]
            instance = positional[0].arg if positional else None
            for statement in method.body:
                if not isinstance(statement, (ast.Expr, ast.Return, ast.Assign, ast.AnnAssign)):
                    continue
                for node in ast.walk(statement):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ENTER_METHODS
                    ):
                        opened = self._opener_held(node.func.value, instance, scope, methods, module)
                        if opened is not None:
                            return opened
        return None

    def _opener_held(
        self, entered: ast.expr, instance: str | None, scope: Scope, methods: list[Function], module: ModuleInfo
    ) -> Transaction | None:
        """The transaction `entered` opens when every value it may hold opens one: itself when it is a call,
        the value of a local assigned once, or every `self.<attribute> = ...` of the class's methods."""
        values: list[tuple[ast.expr, Scope]] = []
        if isinstance(entered, ast.Call):
            values = [(entered, scope)]
        elif isinstance(entered, ast.Name):
            sites = scope.sites_of(entered.id)
            if len(sites) == 1 and isinstance(sites[0], ast.Assign) and isinstance(sites[0].value, ast.Call):
                values = [(sites[0].value, scope)]
        elif _is_attribute_of(entered, instance, None):
            for method in methods:
                at = module.names.scope_of(method)
                for node in _runs_in(method.body, module, at):
                    targets = node.targets if isinstance(node, ast.Assign) else []
                    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                        targets = [node.target]
                    assert isinstance(entered, ast.Attribute)
                    if any(_is_attribute_of(target, instance, entered.attr) for target in targets):
                        value = getattr(node, "value", None)
                        # Anything but a call (a conditional value, an augmented assignment) is not known.
                        if not isinstance(value, ast.Call) or isinstance(node, ast.AugAssign):
                            return None
                        values.append((value, at))
        found: Transaction | None = None
        for value, at in values:
            opened = self.opened_by(value, at, module, decorator=False)
            if opened is None:
                return None
            found = found or opened._replace(shown=f"{module.relpath}:{value.lineno}: {opened.shown}")
        return found

    # -- where code runs ------------------------------------------------------------------------------

    def _inside(
        self, function: Function, module: ModuleInfo, wanted: Callable[[ast.AST, Scope], bool]
    ) -> Iterator[tuple[ast.AST, Transaction | None]]:
        """Each node of `function`'s body that `wanted` picks, with the innermost transaction open there
        (and where it was opened), as the body runs when called."""
        yield from self._walk(list(function.body), module, module.names.scope_of(function), wanted, None)

    def _walk(
        self,
        nodes: list[ast.AST],
        module: ModuleInfo,
        scope: Scope,
        wanted: Callable[[ast.AST, Scope], bool],
        transaction: Transaction | None,
    ) -> Iterator[tuple[ast.AST, Transaction | None]]:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue  # defined here, run later (or never)
            if isinstance(node, ast.If) and is_type_checking_test(node.test, module.names, scope):
                yield from self._walk(list(node.orelse), module, scope, wanted, transaction)
                continue
            if wanted(node, scope):
                yield node, transaction
            if isinstance(node, (ast.With, ast.AsyncWith)):
                current = transaction
                for item in node.items:
                    yield from self._walk([item.context_expr], module, scope, wanted, current)
                    opened = self.opened_by(item.context_expr, scope, module, decorator=False)
                    if opened is not None:
                        current = opened._replace(shown=f"{module.relpath}:{item.context_expr.lineno}: {opened.shown}")
                yield from self._walk(list(node.body), module, scope, wanted, current)
                continue
            yield from self._walk(list(ast.iter_child_nodes(node)), module, scope, wanted, transaction)


def direct_opener(expression: ast.expr, scope: Scope, module: ModuleInfo, *, decorator: bool) -> Transaction | None:
    """The transaction an API (not a project wrapper) opens as `expression`."""
    target = expression.func if isinstance(expression, ast.Call) else expression
    django = module.names.resolve(target, scope) == DJANGO_ATOMIC
    if not django and not (isinstance(target, ast.Attribute) and target.attr in OPENERS):
        return None
    shown = ast.unparse(target)
    if isinstance(expression, ast.Call):
        shown += "(...)" if expression.args or expression.keywords else "()"
    shown = f"@{shown}" if decorator else shown
    if not django or not isinstance(expression, ast.Call):
        return Transaction(shown, django)
    using = next((keyword.value for keyword in expression.keywords if keyword.arg == "using"), None)
    if using is None and expression.args and not isinstance(expression.args[0], ast.Lambda):
        using = expression.args[0]
    parameter = _parameter(using, scope)
    if parameter is not None:
        return Transaction(shown, django, None, parameter)
    return Transaction(shown, django, _alias(using))


def _alias(using: ast.expr | None) -> str | None:
    """The database alias Django's `atomic(...)` is given, as written; None for the default connection (no
    alias, `"default"`, `None`)."""
    if using is None or (isinstance(using, ast.Constant) and using.value in ("default", None)):
        return None
    return ast.unparse(using)


def _parameter(using: ast.expr | None, scope: Scope) -> str | None:
    """The parameter of a function around `scope` the alias `using` is (`atomic(using=using)` in a wrapper), or
    None: whatever each use of the wrapper passes."""
    if not isinstance(using, ast.Name):
        return None
    binder = scope.binder(using.id)
    if binder is not None and any(isinstance(site, ast.arg) for site in binder.sites_of(using.id)):
        return using.id
    return None


def _alias_passed(inner: Transaction, call: ast.Call, callee: Callee, scope: Scope) -> Transaction:
    """The transaction a wrapper opens as `call` (met in `scope`) uses it: the alias its parameter stands for
    read from the argument passed, else the parameter's default. Passed through `*`/`**`, a partial or a
    method (whose arguments do not line up with the call's), or a parameter another function binds, it stays
    the default connection, as before it was followed."""
    parameter = inner.alias_parameter
    if parameter is None:
        return inner
    if callee.partials or callee.module.names.scope_of(callee.function).instance is not None:
        return inner._replace(alias_parameter=None)
    arguments = callee.function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    names = [argument.arg for argument in (*positional, *arguments.kwonlyargs)]
    if parameter not in names or None in keywords or any(isinstance(item, ast.Starred) for item in call.args):
        return inner._replace(alias_parameter=None)
    passed = keywords.get(parameter)
    index = next((position for position, argument in enumerate(positional) if argument.arg == parameter), None)
    if passed is None and index is not None and index < len(call.args):
        passed = call.args[index]
    if passed is None:
        passed = parameter_default(arguments, parameter)
    outer = _parameter(passed, scope)
    if outer is not None:
        return inner._replace(alias=None, alias_parameter=outer)  # the use is in a wrapper itself
    return inner._replace(alias=_alias(passed), alias_parameter=None)


def _adapted(expression: ast.expr, scope: Scope, module: ModuleInfo) -> ast.expr | None:
    """What `method_decorator(...)` is given to adapt, None when `expression` is not a call of it."""
    if not isinstance(expression, ast.Call) or module.names.resolve(expression.func, scope) != METHOD_DECORATOR:
        return None
    return expression.args[0] if expression.args else _keyword(expression, "decorator")


def _keyword(expression: ast.expr, name: str) -> ast.expr | None:
    """The value of the keyword argument `name` of the call `expression`, None when it has none."""
    if not isinstance(expression, ast.Call):
        return None
    return next((keyword.value for keyword in expression.keywords if keyword.arg == name), None)


def _innermost_name(expression: ast.expr) -> str | None:
    """The name an expression ends with, through calls: `atomic` for `transaction.atomic(using=...)`."""
    while isinstance(expression, ast.Call):
        expression = expression.func
    if isinstance(expression, ast.Attribute):
        return expression.attr
    return expression.id if isinstance(expression, ast.Name) else None


def _via(shown: str, inner: Transaction, *, decorator: bool) -> Transaction:
    """A wrapper as messages show it: its use, then where it opens the transaction."""
    return inner._replace(shown=f"{'@' if decorator else ''}{shown} ({inner.shown})")


def _is_yield(node: ast.AST, scope: Scope) -> bool:
    return isinstance(node, (ast.Yield, ast.YieldFrom))


def _every_one_inside(found: list[tuple[ast.AST, Transaction | None]]) -> Transaction | None:
    """The transaction of the first node found, when there is one and every node found is inside one."""
    if not found or any(transaction is None for _, transaction in found):
        return None
    return found[0][1]


def _returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    """The `return` statements of a function body (not of the functions and classes defined in it)."""
    for statement in body:
        for node in _statements(statement):
            if isinstance(node, ast.Return):
                yield node


def _statements(statement: ast.stmt) -> Iterator[ast.stmt]:
    yield statement
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    for child in ast.iter_child_nodes(statement):
        if isinstance(child, ast.stmt):
            yield from _statements(child)
        elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
            for inner in child.body:
                yield from _statements(inner)


def _returned_functions(function: Function) -> list[Function] | None:
    """The functions defined in `function` that its every `return` hands back; None when one returns
    anything else."""
    returned: list[Function] = []
    returns = list(_returns(function.body))
    for statement in returns:
        value = statement.value
        inner = _nested_function(function, value.id) if isinstance(value, ast.Name) else None
        if inner is None:
            return None
        returned.append(inner)
    return returned or None


def _nested_function(function: Function, name: str) -> Function | None:
    """The one function named `name` defined directly in `function`'s body (None when it is bound otherwise too)."""
    found = [
        site
        for site in function.body
        if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef)) and site.name == name
    ]
    if not found:
        return None
    sites = [site for site in ast.walk(ast.Module(body=function.body, type_ignores=[])) if _binds(site, name)]
    return found[0] if len(found) == 1 and len(sites) == 1 else None


def _binds(node: ast.AST, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)


def _only_classes(sites: list[ast.AST], module: ModuleInfo) -> list[tuple[ast.ClassDef, ModuleInfo]]:
    classes = [(site, module) for site in sites if isinstance(site, ast.ClassDef)]
    return classes if classes and len(classes) == len(sites) else []


def _held_values(
    expression: ast.Name | ast.Attribute, scope: Scope, module: ModuleInfo
) -> list[tuple[ast.Call, Scope]]:
    """Every call the name or `self.<attribute>` may hold, each with the scope it is read in; empty when one
    of its bindings is anything but a call of it alone (unpacked, a parameter, an import, a conditional value)."""
    if isinstance(expression, ast.Name):
        binder = scope.binder(expression.id)
        if binder is None:
            return []
        sites = module.live_sites(expression.id) if binder is module.names.root else binder.sites_of(expression.id)
        return _assigned_calls(sites, expression.id, binder)
    instance = scope.instance
    if instance is None or not _is_attribute_of(expression, instance[0], None) or len(scope.sites_of(instance[0])) > 1:
        return []
    body = instance[1]
    assigned = module.names.instance_attributes(body).get(expression.attr, [])
    if any(not isinstance(site.value, ast.Call) for site in assigned):
        return []
    values = [(site.value, site.scope) for site in assigned if isinstance(site.value, ast.Call)]
    in_body = body.sites_of(expression.attr)
    if not in_body:
        return values
    held = _assigned_calls(in_body, expression.attr, body)
    return [*values, *held] if held else []


def _assigned_calls(sites: list[ast.AST], name: str, scope: Scope) -> list[tuple[ast.Call, Scope]]:
    """The calls `sites` assign to `name`, read in `scope`; empty unless every site is `name = <call>`."""
    calls = [
        (site.value, scope)
        for site in sites
        if isinstance(site, ast.Assign)
        and isinstance(site.value, ast.Call)
        and len(site.targets) == 1
        and isinstance(site.targets[0], ast.Name)
        and site.targets[0].id == name
    ]
    return calls if calls and len(calls) == len(sites) else []


def held_opener_names(text: str, lines: list[int], words: frozenset[str]) -> set[str]:
    """The names and attributes `text` assigns on its `lines` that mention `words` (an opener's call, a
    wrapper's): `with tx:` / `with self.tx:` may open a transaction where they are used. A superset."""
    split = text.splitlines()
    found: set[str] = set()
    for number in lines:
        assigned = _ASSIGNED.match(split[number - 1]) if number <= len(split) else None
        if assigned is not None and _innermost_word(assigned.group(2)) in words:
            found.add(assigned.group(1))
    return found


# `name = ...` or `self.name = ...` (an annotation allowed), then what is assigned.
_ASSIGNED = re.compile(r"\s*(?:[A-Za-z_]\w*\s*\.\s*)?([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)\s*(.*)")
_CALLED_WORD = re.compile(r"([A-Za-z_]\w*)\s*\(")


def _innermost_word(assigned: str) -> str | None:
    """The name called first on a line's assigned value (`atomic` of `transaction.atomic(using="x")`)."""
    called = _CALLED_WORD.search(assigned)
    return called.group(1) if called is not None else None


def _is_attribute_of(target: ast.expr, instance: str | None, attribute: str | None) -> bool:
    """Whether `target` is `<instance>.<attribute>` (any attribute when `attribute` is None)."""
    return (
        isinstance(target, ast.Attribute)
        and attribute in (None, target.attr)
        and isinstance(target.value, ast.Name)
        and target.value.id == instance
    )


def _runs_in(body: list[ast.stmt], module: ModuleInfo, scope: Scope) -> Iterator[ast.AST]:
    """Every node of a function body that runs when it is called (not nested definitions, not code behind
    `if TYPE_CHECKING:`)."""
    pending: list[ast.AST] = list(reversed(body))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        if isinstance(node, ast.If) and is_type_checking_test(node.test, module.names, scope):
            pending.extend(reversed(node.orelse))
            continue
        pending.extend(reversed(list(ast.iter_child_nodes(node))))


# -- the pre-pass -------------------------------------------------------------------------------------


def wrapper_words(root: Path, paths: Sequence[str]) -> frozenset[str]:
    """The names a use of a project transaction wrapper may spell: every function or class that may be one
    (a superset of what `TransactionScopes` accepts: a context manager or a decorator that mentions an
    opener or another candidate where it would open it), and every name an import re-exports one as.
    Byte-level, then a parse of the few files shaped like a wrapper's module that may open a transaction
    where a wrapper opens it (`_may_open_inside`, or a `return` of an opener); each file is read once.
    `paths`: the project's files (`modules.project_files`)."""
    prefix = str(root).rstrip("/") + "/"
    files: list[tuple[str, bytes, bool]] = []
    for path in paths:
        try:
            data = read_source(path, DEFAULT_MAX_FILE_SIZE)
        except (OSError, Uncheckable):
            continue  # reported where it is checked itself (CRL001), never read unbounded here
        relpath = path[len(prefix) :] if path.startswith(prefix) else path
        # The substring tests rule out most files far faster than the pattern.
        opens = names_opener(data)
        files.append((relpath, data, opens))
    project = ProjectModules(root, "", {})
    words: set[str] = set()
    # Files that open a transaction or name a candidate, and those of them parsed; the shapes read so far.
    mentioning: set[str] = set()
    parsed: set[str] = set()
    shaped: dict[str, bool] = {}
    # Each parsed module with the positions (in `_definitions` order) of its definitions that may still be
    # wrappers and the words they were last checked with. Only that is kept, not the module: a project of
    # thousands of wrapper-shaped modules is parsed a module at a time (a module is read again, from the
    # parse memo or its file, only when a word found later appears in its bytes).
    pending: list[_PendingModule] = []
    fresh: set[str] | None = None  # the words the last round found (None: the first round)
    while fresh is None or fresh:
        # A file already read is read again for the new words only; one that now names a candidate, for all.
        new_words = sorted(fresh or ())
        found: set[str] = set()
        for relpath, data, opens in files:
            known = relpath in mentioning
            if fresh is None:
                if not opens:
                    continue
            elif not known and not names_any(data, frozenset(new_words)):
                continue
            asked = new_words if known else sorted(words)
            mentioning.add(relpath)
            if asked:
                # A re-export: `from app.db import atomic_block as block` spells the wrapper `block`.
                found.update(alias.decode() for alias in _aliases(frozenset(asked)).findall(data))
            if relpath in parsed:
                continue
            shape = shaped.get(relpath)
            if shape is None:
                shape = shaped[relpath] = _shaped_like_wrappers(data)
            openers = frozenset(asked if known else [*OPENERS, *asked])
            if _returns_opener(data, openers) or (shape and _may_open_inside(data, words | found | set(asked))):
                parsed.add(relpath)
                pending.append(_PendingModule(relpath, data))
        # What a parsed module defines may open a transaction through a candidate found since.
        for entry in pending:
            since = (words | found) - entry.checked_with if entry.checked_with is not None else words | found
            if entry.checked_with is not None and (not since or not names_any(entry.data, frozenset(since))):
                entry.checked_with = words | found
                continue
            module = project.file(entry.relpath)
            entry.checked_with = words | found
            if module is None:
                continue
            definitions = list(_definitions(module.tree))
            if entry.remaining is None:
                entry.remaining = list(range(len(definitions)))
            for position in list(entry.remaining):
                definition = definitions[position]
                if _may_wrap(definition, module.names, words | found):
                    entry.remaining.remove(position)
                    found.add(getattr(definition, "name", ""))
        fresh = found - words
        words |= fresh
    return frozenset(words)


@dataclass
class _PendingModule:
    """A module the pre-pass parsed: its bytes, the positions of its definitions not yet found to be
    wrappers, and the words they were last checked with (None: not checked yet)."""

    relpath: str
    data: bytes
    remaining: list[int] | None = None  # None: every definition (not parsed yet)
    checked_with: set[str] | None = None


def own_wrapper_words(module: ModuleInfo, words: frozenset[str], data: bytes) -> set[str]:
    """The names of the definitions of the checked module (whose text is `data`) that may be wrappers,
    given the project's: the pre-pass read the module's file on disk, which a checked text need not match.
    A text not shaped like a wrapper's module (as the pre-pass decides it) defines none: no walk."""
    if not _shaped_like_wrappers(data) and not _returns_opener(data, frozenset([*OPENERS, *words])):
        return set()
    found: set[str] = set()
    definitions = list(_definitions(module.tree))
    while True:
        known = words | found
        fresh = {getattr(node, "name", "") for node in definitions if _may_wrap(node, module.names, set(known))}
        if fresh <= found:
            return found
        found |= fresh


# -- the prefilter: the statements a scope opens in ---------------------------------------------------


def may_open_scope(data: bytes, wrappers: frozenset[str]) -> bool:
    """Whether a file's bytes may open a transaction scope where the rule opens one: in a `with` item or a
    decorator naming an opener, a project wrapper (`wrappers`, the pre-pass's words) or a name a statement
    naming one of those may bind, transitively (`tx = transaction.atomic`, `from app.db import db_tx as tx`,
    `self.tx = partial(db_tx, ...)`). A file that names an opener only in calls, attributes and imports
    opens none. Errs towards True: an unreadable statement, too many names to follow, a bare carriage
    return (these patterns read lines by newlines), a wrapper the pre-pass found named like a special
    method any call may run (`__call__`, `__init__`)."""
    words = set(wrappers)
    if not words.isdisjoint(_RUN_BY_ANY_CALL) or data.count(b"\r") != data.count(b"\r\n"):
        return True
    if b"__enter__" in data or b"__aenter__" in data or _returns_opener(data, frozenset([*OPENERS, *words])):
        # A wrapper this file defines that opens its transaction without a `with` or a decorator of its
        # own: the pre-pass read the file on disk, which the checked text need not match.
        words.update(name.decode() for name in _DEFINED_CLASS_OR_FUNCTION.findall(data))
    known = frozenset(words)

    def opens(text: bytes) -> bool:
        return names_opener(text) or names_any(text, known)

    lines = Lines(data)
    pending: list[bytes] = []
    # A call's arguments are what it opens only when it is a `method_decorator(tx)` or a `partial(db_tx)()`,
    # which (or an alias of which) the file then names.
    arguments_count = b"partial" in data or b"method_decorator" in data
    # After a newline put before the first line (the pattern starts with its literal newline, which the
    # engine skips ahead to): positions are one past the file's.
    for match in _SCOPE_STATEMENT.finditer(b"\n" + data):
        statement = lines.statement(match.end() - 1)
        if statement is None or opens(statement):
            return True
        pending.extend(_MEMBER_NAME.findall(statement if arguments_count else _without_arguments(statement)))
    seen: set[bytes] = set()
    aliases = _alias_sites(data) if pending else {}
    while pending:
        name = pending.pop()
        if name in seen or name in _KEYWORDS:
            continue
        seen.add(name)
        if len(seen) > _NAMES_AT_MOST:
            return True
        for value in _bound_values(data, name, lines, aliases):
            # Read before its calls go: an opener's result entered (`cm = transaction.atomic(...)`, then
            # `with cm:`) is a scope too.
            if value is None or opens(value):
                return True
            pending.extend(_MEMBER_NAME.findall(_outside_calls(value)))
    return False


# Special methods a wrapper may be that the rule reaches from a call naming no wrapper at all.
_RUN_BY_ANY_CALL = frozenset({"__call__", "__init__", "__new__"})
_KEYWORDS = frozenset(word.encode() for word in (*keyword.kwlist, *keyword.softkwlist))
# How many distinct names the search for bindings follows before it admits the file.
_NAMES_AT_MOST = 200
# A decorator or a `with` header (any `async` statement is read too), where a logical line starts: at the
# start of a physical line, since a compound statement cannot follow a `;`, a `:` or a continuation.
_SCOPE_STATEMENT = re.compile(rb"\n(?:\xef\xbb\xbf)?[ \t\f]*(?:@|with(?![\w\x80-\xff])|async(?![\w\x80-\xff]))")
_DEFINED_CLASS_OR_FUNCTION = re.compile(rb"\b(?:def|class)(?:\s|\\)+([A-Za-z_\x80-\xff][\w\x80-\xff]*)")
# A name that is not the owner of an attribute (no dot after it): what the rule resolves an expression by.
# The owner of `x.tx` decides only where the member `tx` is looked up, and `tx`'s bindings are searched.
_MEMBER_NAME = re.compile(rb"([A-Za-z_\x80-\xff][\w\x80-\xff]*)(?![\w\x80-\xff]|[ \t\f]*(?:\\\r?\n[ \t\f]*)*\.)")
# A call's or a subscript's brackets (holding no other) after a name or a closing bracket.
_ARGUMENTS = re.compile(rb"([\w\x80-\xff]+|[)\]])[ \t\f]*[(\[][^()\[\]]*[)\]]")
# A call or a subscript with what it is made on (innermost first): the names a call's result may be bound
# through are not followed into its arguments, except a `partial(...)`'s (whose first argument it calls).
_CALL = re.compile(
    rb"(?:([A-Za-z_\x80-\xff][\w\x80-\xff]*)(?:[ \t\f]*\.[ \t\f]*[A-Za-z_\x80-\xff][\w\x80-\xff]*)*|[)\]])"
    rb"[ \t\f]*[(\[][^()\[\]]*[)\]]"
)


def _bound_values(data: bytes, name: bytes, lines: Lines, aliases: dict[bytes, list[int]]) -> Iterator[bytes | None]:
    """What each statement that may bind `name` (or an attribute `name`) to a value the rule reads binds
    it to, as text: the rest of the logical line after an assignment, an annotation or a walrus that starts
    a statement or follows a dot, a `;`, a `:`, a chained `=` or a bracket (`name =`, `name: T = ...`,
    `self.name = ...`, `(name) = ...`, `(name := ...)`; unpacked targets, parameters and keyword arguments
    bind nothing it reads), and the name before an `as` (an import's, across lines in parentheses); None
    for one that cannot be read. `aliases`: where each name follows an `as`."""
    for found in _assigned(name).finditer(data):
        start = found.start()
        if starts_word(data, start, after_dot=True) and _starts_target(data, start, found.end(1)):
            yield lines.rest(found.end())
    for position in aliases.get(name, ()):
        yield name_before(data, position)


def _starts_target(data: bytes, start: int, operator: int) -> bool:
    """Whether the name at `start`, whose operator is at `operator`, is an assignment's target or a walrus's,
    not a keyword argument, a parameter or one element of an unpacked target."""
    before = start
    while before > 0 and data[before - 1] in b" \t\f":
        before -= 1
    if before == 0 or data[before - 1] in b"\r\n;:=.\\":
        return True  # `:` too: the body of a one-line compound statement (`if flag: tx = ...`)
    return data[before - 1] in b"([{," and (b")" in data[start:operator] or data.startswith(b":=", operator))


def _alias_sites(data: bytes) -> dict[bytes, list[int]]:
    """Where each name follows an `as` (the keyword's position)."""
    sites: dict[bytes, list[int]] = {}
    for found in _ALIASED.finditer(data):
        if starts_word(data, found.start()):
            sites.setdefault(found.group(1), []).append(found.start())
    return sites


def _outside_calls(value: bytes) -> bytes:
    """A bound value as the rule reads what it binds: without calls and subscripts, unless it makes a
    `partial` (whose first argument is what it calls)."""
    return value if b"partial" in value else _rewritten(_CALL, _without_call, value)


def _without_arguments(text: bytes) -> bytes:
    """`text` with every call's and subscript's brackets emptied, what is called kept."""
    return _rewritten(_ARGUMENTS, _emptied, text)


def _rewritten(pattern: re.Pattern[bytes], replace: Callable[[re.Match[bytes]], bytes], text: bytes) -> bytes:
    """`text` with `pattern`'s matches replaced, round after round (innermost brackets first), until nothing
    changes or `LINES_AT_MOST` rounds have run (what is left then is only read for more names than needed)."""
    for _ in range(LINES_AT_MOST):
        rewritten = pattern.sub(replace, text)
        if rewritten == text:
            break
        text = rewritten
    return text


def _emptied(match: re.Match[bytes]) -> bytes:
    # After a keyword (`else (a)`) the brackets group a value: kept.
    return match.group(0) if match.group(1) in _KEYWORDS else match.group(1) + b"()"


def _without_call(match: re.Match[bytes]) -> bytes:
    # After a keyword (`else (a)`, `or (b)`) the brackets group a value: kept. Whatever else was called is
    # left as an empty pair, so that a call of its result (`f(x)(y)`) goes too.
    return match.group(0) if match.group(1) in _KEYWORDS else b"()"


@lru_cache(maxsize=1024)
def _assigned(name: bytes) -> re.Pattern[bytes]:
    """`name` as a whole word then, as group 1, what stands before its operator (`=`, `:`, `:=`)."""
    return re.compile(re.escape(name) + rb"(?![\w\x80-\xff])([\s\\)]*)(?:=(?!=)|:)")


_ALIASED = re.compile(rb"as(?:[\s\\])+([A-Za-z_\x80-\xff][\w\x80-\xff]*)")


@lru_cache(maxsize=8)
def wrapper_pattern(words: frozenset[str]) -> re.Pattern[bytes]:
    """Any of `words` as a whole word, in a file's bytes."""
    alternatives = b"|".join(re.escape(word.encode()) for word in sorted(words, key=len, reverse=True))
    return re.compile(rb"\b(?:%s)\b" % alternatives)


def _shaped_like_wrappers(data: bytes) -> bool:
    """Whether a module's bytes may define a context manager (a `@contextmanager` function, a class with
    `__enter__`) or a decorator returning a function it defines."""
    if _CONTEXT_MANAGER_SHAPE.search(data):
        return True
    returned = _returned_names(data)
    return bool(returned) and not returned.isdisjoint(_DEFINED_NAME.findall(data))


def _may_open_inside(data: bytes, words: set[str]) -> bool:
    """Whether a module shaped like a wrapper's may hold one given the candidates `words`: a class whose
    `__enter__` may call an opener, or a function whose `with` item or decorator may open a scope (a
    context manager's, a decorator's inner function's: `may_open_scope`). A decorator returning an opener
    applied to its function is `_returns_opener`'s."""
    return b"__enter__" in data or b"__aenter__" in data or may_open_scope(data, frozenset(words))


def _returned_names(data: bytes) -> set[bytes]:
    return {found.group(1) for found in _RETURNED_NAME.finditer(data) if starts_word(data, found.start())}


def _returns_opener(data: bytes, openers: frozenset[str]) -> bool:
    """Whether a `return` may hand back one of `openers` (a dotted path ending in it) applied to something."""
    return bool(openers) and any(starts_word(data, found.start()) for found in _returned_opener(openers).finditer(data))


@lru_cache(maxsize=32)
def _returned_opener(openers: frozenset[str]) -> re.Pattern[bytes]:
    alternatives = b"|".join(re.escape(word.encode()) for word in sorted(openers))
    return re.compile(rb"return" + _SKIPPED + _DOTTED + rb"(?:%s)\b" % alternatives)


@lru_cache(maxsize=32)
def _aliases(words: frozenset[str]) -> re.Pattern[bytes]:
    return re.compile(rb"%s\s+as\s+([A-Za-z_]\w*)" % wrapper_pattern(words).pattern)


def _definitions(tree: ast.Module) -> Iterator[ast.AST]:
    """The functions and the classes with `__enter__`/`__aenter__` of a module, at any depth."""
    for node in _every_statement(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.ClassDef)
            and any(
                isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name in ENTER_METHODS
                for statement in node.body
            )
        ):
            yield node


def _every_statement(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of `body` at any depth, nested definitions' bodies included. Definitions are only
    ever statements, so the walk skips expressions: a tenth of the nodes `ast.walk` visits."""
    pending: list[ast.stmt] = list(reversed(body))
    while pending:
        statement = pending.pop()
        yield statement
        nested: list[ast.stmt] = []
        for field in _STATEMENT_FIELDS:
            nested.extend(getattr(statement, field, ()))
        for handler in getattr(statement, "handlers", ()):
            nested.extend(handler.body)
        for case in getattr(statement, "cases", ()):
            nested.extend(case.body)
        pending.extend(reversed(nested))


_STATEMENT_FIELDS = ("body", "orelse", "finalbody")


def _may_wrap(node: ast.AST, names: ModuleNames, words: set[str]) -> bool:
    """Whether a definition may be a wrapper: a context manager function with a `with` that may open a
    transaction, a class with `__enter__`/`__aenter__` that may call an opener, a decorator that may
    return one applied to its function or a function of its own that may open one (or such a decorator:
    a factory)."""
    if isinstance(node, ast.ClassDef):
        return any(isinstance(call, ast.Call) and _may_be_opener(call.func, names, words) for call in ast.walk(node))
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    defined_in = names.scope_of(node).parent
    if defined_in is not None and any(
        names.resolve(decorator, defined_in) in CONTEXT_MANAGERS for decorator in node.decorator_list
    ):
        return _may_open(node.body, names, words)
    return _may_decorate(node, names, words)


def _may_decorate(function: Function, names: ModuleNames, words: set[str]) -> bool:
    for returned in _returns(function.body):
        value = returned.value
        if isinstance(value, ast.Call) and _may_be_opener(value.func, names, words):
            return True
        inner = _nested_function(function, value.id) if isinstance(value, ast.Name) else None
        if inner is not None and (
            any(_may_be_opener(decorator, names, words) for decorator in inner.decorator_list)
            or _may_open(inner.body, names, words)
            or _may_decorate(inner, names, words)
        ):
            return True
    return False


def _may_open(body: list[ast.stmt], names: ModuleNames, words: set[str]) -> bool:
    """Whether a body has a `with` whose item may open a transaction."""
    return any(
        isinstance(node, (ast.With, ast.AsyncWith))
        and any(_may_be_opener(item.context_expr, names, words) for item in node.items)
        for statement in body
        for node in ast.walk(statement)
    )


def _may_be_opener(expression: ast.expr, names: ModuleNames, words: set[str]) -> bool:
    """Whether an expression may open a transaction: the name it ends with (through calls) is an opener or
    a candidate wrapper, or an alias of Django's atomic."""
    while isinstance(expression, ast.Call):
        expression = expression.func
    if isinstance(expression, ast.Attribute):
        return expression.attr in OPENERS or expression.attr in words
    if isinstance(expression, ast.Name):
        return expression.id in OPENERS or expression.id in words or expression.id in _atomic_aliases(names)
    return False


@lru_cache(maxsize=64)
def _atomic_aliases(names: ModuleNames) -> frozenset[str]:
    return frozenset(
        alias
        for scope in (names.root, *names.scopes.values())
        for alias, target in scope.bindings.items()
        if target == DJANGO_ATOMIC
    )
