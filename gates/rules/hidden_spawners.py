"""CRL106: spawners reached in ways a reader (or a simpler linter) cannot see.

`getattr` on a spawner module with a name the gate cannot read or with a spawner's name, and the same
through the module's namespace (`vars(threading)[name]`, `threading.__dict__[name]`, `.get(name)`);
importing such a module through `__import__` / `importlib.import_module` (a relative name resolved against
its `package=`; a name built at run time whose literal start names one: `f"multiprocessing.{x}"`,
`"multiprocessing." + x`), fetching it from `sys.modules` or naming a spawner with
`pkgutil.resolve_name("concurrent.futures:ThreadPoolExecutor")`; and `from <spawner module> import *`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.scoped import ScopedVisitor, lines_mentioning
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.knowledge.spawners import (
    OS_OR_PTY,
    PACKAGE_WORDS,
    SPAWNER_MODULES,
    display_name,
    imports_spawner_module,
    spawner_kind,
)
from corral.gates.rules.base import Rule
from corral.gates.source.prefilter import NAME, RELATIVE_IMPORT, WHITESPACE, WORD, Lines, Source, ends_word, starts_word

DYNAMIC_IMPORTS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
RESOLVE_NAME = "pkgutil.resolve_name"
SYS_MODULES = "sys.modules"
NAMESPACES = frozenset({"builtins.vars"})

# -- the prefilter: a textual over-approximation of what `check` finds ------------------------------------
_MODULES = rb"(?:threading|_thread|multiprocessing|concurrent|asyncio|os|pty|subprocess|socketserver|http)\b"
# A dynamic import of a spawner module names the module in a string (the import function may be aliased).
_QUOTED_MODULE = re.compile(rb"['\"]" + _MODULES)
# A call of a dynamic import function, and the function named without being called (an alias, a value).
_DYNAMIC_IMPORT_CALL = re.compile(rb"(?:__import__|import_module)" + WHITESPACE + rb"*\(")
_IMPORT_STATEMENT = re.compile(rb"(?:import|from)(?![\w\x80-\xff])")
_ALIASED = re.compile(WHITESPACE + rb"+as(?![\w\x80-\xff])")
_DYNAMIC_IMPORT_UNCALLED = re.compile(rb"(?:__import__|import_module)(?![\w\x80-\xff])(?!" + WHITESPACE + rb"*\()")
# Any star import: in a file whose imports name a spawner package, it may be one of that package's modules
# (relative ones too, inside the package itself).
_STAR_IMPORT = re.compile(rb"import" + WHITESPACE + rb"*\*")
# `getattr` named without being called: an alias, or the function passed on.
_GETATTR_UNCALLED = re.compile(rb"getattr(?![\w\x80-\xff])(?!" + WHITESPACE + rb"*\()")
_GETATTR_CALL = re.compile(rb"getattr" + WHITESPACE + rb"*\(")
# A module's namespace: `vars(` then the module, or the module then `.__dict__` (found by their literal
# word first: a pattern starting with a class or a name would be tried at every byte of every file).
_VARS_CALL = re.compile(rb"vars" + WHITESPACE + rb"*\(")
# `vars` as a value (an alias, a default, an argument): after what starts an expression or before what
# ends one. Prose ("template vars") is neither, and most files mention the word only there.
_STARTS_EXPRESSION = re.compile(rb"(?:[=(,\[:{]|(?<![\w\x80-\xff])(?:return|else|or|and|yield|in|lambda))$")
_ENDS_EXPRESSION = re.compile(WHITESPACE + rb"*[,)\]};]")
# The dotted name before `.__dict__`; its first name is what the lookup resolves through.
_NAME_BEFORE_DOT = re.compile(
    rb"(?<![\w\x80-\xff.])("
    + NAME
    + rb")(?:"
    + WHITESPACE
    + rb"*\."
    + WHITESPACE
    + rb"*"
    + NAME
    + rb")*"
    + WHITESPACE
    + rb"*\."
    + WHITESPACE
    + rb"*$"
)
# How far before `.__dict__` its object's name is looked for (a longer span: admit the file).
_LOOK_BACK = 200


def _vars_as_value(data: bytes) -> bool:
    """Whether `vars` stands somewhere as a value rather than called or in prose."""
    position = data.find(b"vars")
    while position != -1:
        end = position + 4
        if starts_word(data, position) and ends_word(data, end) and not _VARS_CALL.match(data, position):
            before = data[max(0, position - 16) : position].rstrip(b" \t\f\\\r\n")
            if _STARTS_EXPRESSION.search(before) or _ENDS_EXPRESSION.match(data, end):
                return True
        position = data.find(b"vars", end)
    return False


def _namespace_heads(data: bytes) -> Iterator[bytes | None]:
    """The names a namespace lookup may look into: the first name inside `vars(...)`, and the name before
    each `.__dict__` (None: one too far back to read)."""
    for match in _VARS_CALL.finditer(data):
        if starts_word(data, match.start()):
            yield from _heads(data, match.end())
    position = data.find(b"__dict__")
    while position != -1:
        before = _NAME_BEFORE_DOT.search(data, max(0, position - _LOOK_BACK), position)
        if before is None:
            # Not a name's attribute (`f().__dict__`, `x[0].__dict__`) or too far to read: the object
            # may still be a module, so the file is admitted.
            if data[max(0, position - 1) : position] == b".":
                yield None
        else:
            yield before.group(1)
        position = data.find(b"__dict__", position + 8)


_IMPORTS = (re.compile(rb"import(?![\w\x80-\xff])"), re.compile(rb"from(?![\w\x80-\xff])"))
# A comment runs to the end of its line: matched whole, it can be matched only one way (a pattern that
# could stop a comment at any `#` backtracks exponentially over comment lines).
_COMMENT = rb"#[^\r\n]*(?![^\r\n])"
# The name an expression starts with (after brackets, line breaks and comments), and whether a walrus
# binds it to what follows.
_HEAD = re.compile(rb"(?:" + WHITESPACE + rb"|\(|" + _COMMENT + rb")*(" + NAME + rb")(" + WHITESPACE + rb"*:=)?")
# What follows a name that an annotation or an assignment binds: its `:`, or its `=` (past a bracket, as
# in `(loop) = ...`), across line breaks and comments.
_BINDS = re.compile(
    rb"(?:(?:" + WHITESPACE + rb"|" + _COMMENT + rb")*(:)(?!=)|(?:" + WHITESPACE + rb"|\)|" + _COMMENT + rb")*=(?!=))"
)
# A value choosing between operands, each of which may be a loop (`names.py` follows `or`/`and`/`if`).
_CHOICE = re.compile(rb"(?<![\w\x80-\xff])(?:or|and|if)(?![\w\x80-\xff])")
# Packages whose own modules reach spawner modules through relative imports.
_SPAWNER_PACKAGES = frozenset(module.partition(".")[0] for module in SPAWNER_MODULES if "." in module)
# How many names the prefilter follows through assignments before it gives up and admits the file.
_FOLLOW_AT_MOST = 24


def _dynamic_import_may_name_spawner(data: bytes) -> bool:
    """Whether a dynamic import may name a spawner module: a string in the file names one, or a call's
    argument is spelled so that only evaluating it tells (escapes, adjacent literals), or the import
    function is aliased (its calls then carry no name to look for)."""
    lines = Lines(data)
    for match in _DYNAMIC_IMPORT_UNCALLED.finditer(data):
        start = lines.start(match.start())
        if start is None:
            return True
        line = data[start : match.start()].lstrip()
        if line.startswith(b"#"):
            continue
        # An import statement names it without calling it; only its alias (`as load`) is then called.
        if not _IMPORT_STATEMENT.match(line) or b";" in line or _ALIASED.match(data, match.end()):
            return True
    if _QUOTED_MODULE.search(data):
        return True
    for match in _DYNAMIC_IMPORT_CALL.finditer(data):
        argument = lines.rest(match.end())
        if argument is None or b"\\" in argument or argument.count(b"'") + argument.count(b'"') > 2:
            return True
    return False


def _heads(data: bytes, position: int) -> Iterator[bytes]:
    """The names the expression at `position` may resolve through: its first name, and after a walrus
    (`(t := threading)`) the first name of what it binds."""
    while (head := _HEAD.match(data, position)) is not None:
        yield head.group(1)
        if not head.group(2):
            return
        position = head.end()


def _may_reach_spawner_module(data: bytes, *, in_spawner_package: bool) -> bool:
    """Whether a getattr call, or a namespace lookup (`vars(x)`, `x.__dict__`), may have a spawner module
    or an event loop as its object.

    As `names.py` resolves it, that argument starts with a name bound by an import of a spawner module
    (or of a loop factory or type), or assigned from a value starting with such a name (a chain of
    assignments, a factory call), or a parameter annotated with a loop type. So: the name is one of the
    words of an import statement naming a spawner package, or an assignment or annotation of it leads
    to one.
    """
    if any(starts_word(data, match.start(), after_dot=True) for match in _GETATTR_UNCALLED.finditer(data)):
        return True
    if b"vars" in data and _vars_as_value(data):
        return True
    heads = {head for match in _GETATTR_CALL.finditer(data) for head in _heads(data, match.end())}
    for head in _namespace_heads(data):
        if head is None:
            return True
        heads.add(head)
    if not heads:
        return False
    lines = Lines(data)
    imported = _words_of_spawner_imports(lines, relative_too=in_spawner_package)
    if imported is None:
        return True
    pending, seen = list(heads), set(heads)
    while pending:
        name = pending.pop()
        if name in imported:
            return True
        for followed in _names_bound_from(lines, name):
            if followed is None:
                return True
            if followed not in seen:
                if len(seen) >= _FOLLOW_AT_MOST:
                    return True
                seen.add(followed)
                pending.append(followed)
    return False


def _words_of_spawner_imports(lines: Lines, *, relative_too: bool) -> set[bytes] | None:
    """Every word of the import statements that name a spawner package, and of relative ones when the
    file lies inside such a package (None: a statement too long to read)."""
    data = lines.data
    words: set[bytes] = set()
    read_to = -1
    for match in sorted((match for pattern in _IMPORTS for match in pattern.finditer(data)), key=_start):
        if match.start() < read_to or not starts_word(data, match.start()):
            continue  # inside a statement already read
        end = lines.end(match.start())
        statement = lines.statement(match.start())
        if end is None or statement is None:
            return None
        read_to = end
        if (
            any(package in statement for package in PACKAGE_WORDS)
            or OS_OR_PTY.search(statement)
            or (relative_too and RELATIVE_IMPORT.search(statement))
        ):
            words.update(WORD.findall(statement))
    return words


def _start(match: re.Match[bytes]) -> int:
    return match.start()


def _names_bound_from(lines: Lines, name: bytes) -> Iterator[bytes | None]:
    """The names `name`'s bindings may resolve through: every name of each assigned value (`name = x.y`,
    `name = f()`, `name = (a := b)`, `name = a or f()`) and every name of each annotation
    (`name: AbstractEventLoop`); None for a binding too long to read."""
    data = lines.data
    position = data.find(name)
    while position != -1:
        end = position + len(name)
        binding = _BINDS.match(data, end) if starts_word(data, position) and ends_word(data, end) else None
        if binding is None:
            pass
        elif binding.group(1):
            value = lines.rest(binding.end())
            line_start = lines.start(position)
            alone = line_start is not None and not data[line_start:position].strip()
            if value is not None and alone and not value.split(b"#", 1)[0].strip():
                # `loop:` alone on its line in a parameter list: the annotation is on the next one.
                following = lines.end(binding.end())
                value = None if following is None else lines.rest(following + 1)
            if value is None:
                yield None
            else:
                yield from WORD.findall(value)
        else:
            yield from _heads(data, binding.end())
            # `loop = loop or asyncio.get_event_loop()`, `a if c else ...`: any name of the value may lead on.
            value = lines.rest(binding.end())
            if value is None:
                yield None
            elif _CHOICE.search(value):
                yield from WORD.findall(value)
        position = data.find(name, end)


_ADVICE = "outside infra; name the API inside an infra helper instead"


def _named_module(node: ast.expr) -> tuple[str, bool] | None:
    """The spawner module a string names, and whether the string is whole: `"threading"` names it; a
    string built at run time (`f"multiprocessing.{x}"`, `"multiprocessing." + x`) names the module its
    literal start ends in a `.` or `:` after. None when it names none."""
    whole = True
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        node, whole = (first if isinstance(first, ast.Constant) else ast.Constant(value="")), False
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            node = node.left
        whole = False
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return None
    text: str = node.value
    # `<loop>` stands for an event loop in the table, never for a module.
    modules = sorted(SPAWNER_MODULES - {"<loop>"})
    if whole:
        return (text, True) if text in SPAWNER_MODULES and text != "<loop>" else None
    prefixes = [text[:index] for index, char in enumerate(text) if char in ".:"]
    found = next((name for name in prefixes if name in modules), None)
    if found is None and text.endswith("."):
        # `"concurrent." + x` may complete to `concurrent.futures`.
        found = next((module for module in modules if module.startswith(text)), None)
    return None if found is None else (found, False)


def _imported_module(call: ast.Call) -> tuple[str, bool] | None:
    """The spawner module a dynamic import names: its first argument, resolved against a literal
    `package=` when it is relative (`import_module(".futures", package="concurrent")`)."""
    target = call.args[0]
    if isinstance(target, ast.Constant) and isinstance(target.value, str) and target.value.startswith("."):
        package = next((keyword.value for keyword in call.keywords if keyword.arg == "package"), None)
        if package is None and len(call.args) > 1:
            package = call.args[1]
        if not (isinstance(package, ast.Constant) and isinstance(package.value, str)):
            return None
        relative = target.value
        level = len(relative) - len(relative.lstrip("."))
        parts = package.value.split(".")
        if level > len(parts):
            return None
        base = ".".join(parts[: len(parts) - level + 1])
        rest = relative[level:]
        target = ast.Constant(value=f"{base}.{rest}" if rest else base)
    return _named_module(target)


class HiddenSpawners(Rule, ScopedVisitor):
    HIDDEN: ClassVar[str] = "CRL106"
    codes: ClassVar[dict[str, str]] = {
        HIDDEN: "a spawner reached through getattr, a dynamic import or a star import outside infra"
    }

    VALID = (
        """
        import threading
        lock_type = getattr(threading, "Lock")
        """,
        """
        import importlib
        plugin = importlib.import_module("myapp.plugins")
        """,
        """
        def f(obj, name):
            return getattr(obj, name)
        """,
        """
        from asyncio import gather, wait_for
        """,
    )
    INVALID = (
        """
        import threading
        make = getattr(threading, name)  # error: 8 CRL106 "getattr(threading, <name>)"
        """,
        """
        import os
        fork = getattr(os, "fork")  # error: 8 CRL106 "getattr(os, 'fork')"
        """,
        """
        import importlib
        mp = importlib.import_module("multiprocessing")  # error: 6 CRL106 "dynamic import of multiprocessing"
        """,
        """
        threading = __import__("threading")  # error: 13 CRL106 "dynamic import of threading"
        """,
        """
        from importlib import import_module as load
        mp = load("multiprocessing")  # error: 6 CRL106 "dynamic import of multiprocessing"
        """,
        """
        from concurrent.futures import *  # error: 1 CRL106 "from concurrent.futures import *"
        """,
        """
        import asyncio
        async def f():
            loop = asyncio.get_running_loop()
            return getattr(loop, "create_task")  # error: 12 CRL106 "getattr(loop, 'create_task')"
        """,
    )

    def __init__(self, context: FileContext) -> None:
        Rule.__init__(self, context)
        # The ways of hiding, and any alias bound to one of them (`im = importlib.import_module`).
        hiders = {*DYNAMIC_IMPORTS, *NAMESPACES, "builtins.getattr", RESOLVE_NAME, SYS_MODULES}
        words = {"getattr", "__import__", "import_module", "import", "vars", "__dict__", "modules", "resolve_name"}
        words.update(
            alias
            for scope in (context.names.root, *context.names.scopes.values())
            for alias in scope.bindings
            if any(target in hiders for target in scope.targets(alias))
        )
        ScopedVisitor.__init__(self, context.names, lines_mentioning(context.text, words))
        self.found: list[Finding] = []

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        data = source.data
        if source.has(b"__import__", b"import_module") and _dynamic_import_may_name_spawner(data):
            return True
        # `sys.modules["threading"]`, `resolve_name("concurrent.futures:...")`: a string names the module,
        # which the file need not import.
        if source.has(b"modules", b"resolve_name") and _QUOTED_MODULE.search(data):
            return True
        if not source.holds(imports_spawner_module):
            return False
        in_spawner_package = bool(source.package) and source.package[0] in _SPAWNER_PACKAGES
        if source.has(b"getattr", b"vars", b"__dict__") and _may_reach_spawner_module(
            data, in_spawner_package=in_spawner_package
        ):
            return True
        return _STAR_IMPORT.search(data) is not None

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        yield from self.found

    def _report(self, node: ast.AST, message: str) -> None:
        self.found.append(self.context.finding(node, self.HIDDEN, message))

    def visit_Call(self, node: ast.Call) -> None:
        candidates = self.resolve_all(node.func)
        importer = next((name for name in candidates if name in DYNAMIC_IMPORTS), None)
        if "builtins.getattr" in candidates and len(node.args) >= 2:
            module = self._spawner_module(node.args[0])
            if module is not None:
                self._check_fetch(node, f"getattr({display_name(module)}, {{}})", module, node.args[1])
        elif any(name in NAMESPACES for name in candidates) and len(node.args) == 1:
            pass  # judged where the namespace is looked into (`visit_Subscript`, `.get`)
        elif importer is not None and node.args:
            named = _imported_module(node)
            if named is not None and named[1]:
                self._report(node, f"dynamic import of {named[0]} hides its spawners {_ADVICE}")
            elif named is not None:
                self._report(node, f"dynamic import of a name built on {named[0]} may hide its spawners {_ADVICE}")
        elif RESOLVE_NAME in candidates and node.args:
            self._check_resolve_name(node, node.args[0])
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            self._check_lookup(node, node.func.value, node.args[0])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self._check_lookup(node, node.value, node.slice)
        self.generic_visit(node)

    def _check_lookup(self, node: ast.expr, mapping: ast.expr, key: ast.expr) -> None:
        """`sys.modules[...]` naming a spawner module; `vars(m)[...]` or `m.__dict__[...]` of one."""
        if SYS_MODULES in self.resolve_all(mapping):
            named = _named_module(key)
            if named is not None:
                self._report(node, f"sys.modules lookup of {named[0]} hides its spawners {_ADVICE}")
            return
        namespace_of: ast.expr | None = None
        if isinstance(mapping, ast.Attribute) and mapping.attr == "__dict__":
            namespace_of = mapping.value
        elif (
            isinstance(mapping, ast.Call)
            and len(mapping.args) == 1
            and any(name in NAMESPACES for name in self.resolve_all(mapping.func))
        ):
            namespace_of = mapping.args[0]
        module = None if namespace_of is None else self._spawner_module(namespace_of)
        if module is not None:
            self._check_fetch(node, f"the namespace of {display_name(module)}[{{}}]", module, key)

    def _check_resolve_name(self, node: ast.Call, name: ast.expr) -> None:
        """`pkgutil.resolve_name("concurrent.futures:ThreadPoolExecutor")` (or the dotted form) names a
        spawner or a spawner module; a name built at run time on a spawner module's prefix may."""
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            dotted = name.value.replace(":", ".")
            if spawner_kind(dotted) is not None or dotted in SPAWNER_MODULES - {"<loop>"}:
                self._report(node, f"pkgutil.resolve_name({name.value!r}) hides a spawner {_ADVICE}")
            return
        named = _named_module(name)
        if named is not None:
            self._report(node, f"pkgutil.resolve_name of a name built on {named[0]} may fetch a spawner {_ADVICE}")

    def _spawner_module(self, node: ast.expr) -> str | None:
        return next((name for name in self.resolve_all(node) if name in SPAWNER_MODULES), None)

    def _check_fetch(self, node: ast.expr, shape: str, module: str, attribute: ast.expr) -> None:
        """A fetch of `attribute` from a spawner module: a finding when the name is a spawner's or unknown."""
        if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
            self._report(node, f"{shape.format('<name>')} may fetch a spawner the gate cannot see {_ADVICE}")
        elif spawner_kind(f"{module}.{attribute.value}") is not None:
            self._report(node, f"{shape.format(repr(attribute.value))} hides a spawner {_ADVICE}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        origin = self.names.absolute_module(node.level, node.module)
        if origin in SPAWNER_MODULES and any(alias.name == "*" for alias in node.names):
            self._report(node, f"from {origin} import * hides its spawners {_ADVICE}")
