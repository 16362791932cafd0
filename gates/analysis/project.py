"""Which project functions a call runs: the call graph across functions and modules, read on demand.

`ProjectFunctions.callees(call, scope, module)` names the function bodies a call runs when the gate can
tell which they are: a function defined at module level in the same module, a function imported from
another project module (through `from x import f`, `import x` then `x.f()`, relative imports and
re-exports such as an `__init__.py` that imports `f` from a submodule), a function defined inside the
calling function, and a method called on `self` or `cls` inside its own class (the class body only:
inherited methods are not looked up). Anything else (an object of unknown type, a name bound to anything
but a `def`, a module outside the project) has no callees: it is never guessed.

Other modules come from `ProjectModules`, so every module read is a dependency of the checked file and a
cached result is served only while those files are unchanged.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import NamedTuple

from corral.gates.analysis.modules import MAX_REEXPORTS, ModuleInfo, ProjectModules
from corral.gates.analysis.names import LOCAL, Scope
from corral.gates.source.prefilter import ends_word, starts_word

Function = ast.FunctionDef | ast.AsyncFunctionDef


class Callee(NamedTuple):
    """A function body a call runs, the module it is in, and how a chain shows it (`notify`, `Mailer.send`)."""

    function: Function
    module: ModuleInfo
    shown: str


class _Methods:
    """The methods of one module's classes by their body's scope: the class and the parameter that is the
    instance (`self`) or the class (`cls`) in it."""

    def __init__(self, module: ModuleInfo) -> None:
        self.by_scope: dict[Scope, tuple[ast.ClassDef, str]] = {}
        scopes = module.names.scopes
        # Every class has a scope of its own, so the pre-pass already found them all.
        for node in [node for node in scopes if isinstance(node, ast.ClassDef)]:
            for statement in node.body:
                if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_static(statement):
                    continue
                positional = [*statement.args.posonlyargs, *statement.args.args]
                if positional and statement in scopes:
                    self.by_scope[scopes[statement]] = (node, positional[0].arg)


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


def _only_functions(sites: Sequence[ast.AST]) -> list[Function]:
    """The `def`s binding a name, or nothing when anything else binds it too (its value is then unknown)."""
    functions = [site for site in sites if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return functions if len(functions) == len(sites) else []


def _bound_by(statement: ast.stmt) -> set[str]:
    """The names a statement of a class body binds directly (a method, an attribute assigned)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _is_static(function: Function) -> bool:
    return any(
        isinstance(decorator, ast.Name) and decorator.id == "staticmethod" for decorator in function.decorator_list
    )


class ProjectFunctions:
    """The project's functions as one checked file's calls reach them (modules read through `project`)."""

    def __init__(self, project: ProjectModules) -> None:
        self.project = project
        self._methods: dict[ModuleInfo, _Methods] = {}

    def callees(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> list[Callee]:
        """The function bodies `call`, met in `scope` of `module`, runs; empty when the gate cannot tell."""
        func = call.func
        if isinstance(func, ast.Name):
            binder = scope.binder(func.id)
            if binder is None:
                return []
            target = binder.bindings[func.id]
            if target != LOCAL:
                return self._imported(target, 0)
            if binder is module.names.root:
                return self._defined(module, func.id, func.id)
            return self._local(binder, func.id, module)
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name):
                method = self._method(func.value.id, func.attr, scope, module)
                if method:
                    return method
            dotted = module.names.resolve(func, scope)
            if dotted is not None:
                return self._imported(dotted, 0)
        return []

    def methods(self, module: ModuleInfo) -> _Methods:
        known = self._methods.get(module)
        if known is None:
            known = self._methods[module] = _Methods(module)
        return known

    def _method(self, instance: str, attribute: str, scope: Scope, module: ModuleInfo) -> list[Callee]:
        binder = scope.binder(instance)
        if binder is None:
            return []
        owner = self.methods(module).by_scope.get(binder)
        if owner is None or owner[1] != instance:
            return []
        cls = owner[0]
        sites = [statement for statement in cls.body if attribute in _bound_by(statement)]
        return [Callee(function, module, f"{cls.name}.{attribute}") for function in _only_functions(sites)]

    @staticmethod
    def _local(binder: Scope, name: str, module: ModuleInfo) -> list[Callee]:
        return [Callee(function, module, name) for function in _only_functions(binder.sites_of(name))]

    @staticmethod
    def _defined(module: ModuleInfo, name: str, shown: str) -> list[Callee]:
        return [Callee(function, module, shown) for function in _only_functions(module.bindings.get(name, []))]

    def _imported(self, dotted: str, reexports: int, shown: str | None = None) -> list[Callee]:
        owner, _, name = dotted.rpartition(".")
        # A chain shows the name the call site used, whatever module it was re-exported through.
        shown = shown or name
        if not owner or reexports > MAX_REEXPORTS:
            return []
        data = self.project.source(owner)
        if data is None or not may_bind_function(data, name):
            return []
        module = self.project.module(owner)
        if module is None:
            return []
        sites = module.bindings.get(name, [])
        if len(sites) == 1 and isinstance(sites[0], ast.ImportFrom):
            # A re-export: the name is whatever the module imported it as.
            target = module.names.root.lookup(name)
            return self._imported(target, reexports + 1, shown) if target is not None else []
        return self._defined(module, name, shown)
