"""CRL106: spawners reached in ways a reader (or a simpler linter) cannot see.

`getattr` on a spawner module with a name the gate cannot read or with a spawner's name, importing such a
module through `__import__` / `importlib.import_module`, and `from <spawner module> import *`.
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

# -- the prefilter: a textual over-approximation of what `check` finds ------------------------------------
_MODULES = rb"(?:threading|_thread|multiprocessing|concurrent|asyncio|os|pty)\b"
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
    """Whether a getattr call may have a spawner module or an event loop as its first argument.

    As `names.py` resolves it, that argument starts with a name bound by an import of a spawner module
    (or of a loop factory or type), or assigned from a value starting with such a name (a chain of
    assignments, a factory call), or a parameter annotated with a loop type. So: the name is one of the
    words of an import statement naming a spawner package, or an assignment or annotation of it leads
    to one.
    """
    if any(starts_word(data, match.start(), after_dot=True) for match in _GETATTR_UNCALLED.finditer(data)):
        return True
    heads = {head for match in _GETATTR_CALL.finditer(data) for head in _heads(data, match.end())}
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
        hiders = {*DYNAMIC_IMPORTS, "builtins.getattr"}
        words = {"getattr", "__import__", "import_module", "import"}
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
        if not source.holds(imports_spawner_module):
            return False
        in_spawner_package = bool(source.package) and source.package[0] in _SPAWNER_PACKAGES
        if source.has(b"getattr") and _may_reach_spawner_module(data, in_spawner_package=in_spawner_package):
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
            module = next((name for name in self.resolve_all(node.args[0]) if name in SPAWNER_MODULES), None)
            if module is not None:
                attribute = node.args[1]
                shown = display_name(module)
                if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
                    self._report(
                        node,
                        f"getattr({shown}, <name>) may fetch a spawner the gate cannot see {_ADVICE}",
                    )
                elif spawner_kind(f"{module}.{attribute.value}") is not None:
                    self._report(node, f"getattr({shown}, {attribute.value!r}) hides a spawner {_ADVICE}")
        elif importer is not None and node.args:
            target = node.args[0]
            # `<loop>` stands for an event loop in the table, never for a module.
            if isinstance(target, ast.Constant) and target.value in SPAWNER_MODULES and target.value != "<loop>":
                self._report(node, f"dynamic import of {target.value} hides its spawners {_ADVICE}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        origin = self.names.absolute_module(node.level, node.module)
        if origin in SPAWNER_MODULES and any(alias.name == "*" for alias in node.names):
            self._report(node, f"from {origin} import * hides its spawners {_ADVICE}")
