"""CRL106: spawners reached in ways a reader (or a simpler linter) cannot see.

`getattr` on a spawner module with a name the gate cannot read or with a spawner's name, importing such a
module through `__import__` / `importlib.import_module`, and `from <spawner module> import *`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.prefilter import NAME, WHITESPACE, WORD, Source, logical_line_end, starts_word
from corral.gates.registry import FileContext, Rule, ScopedVisitor, lines_mentioning
from corral.gates.spawners import (
    PACKAGE_WORDS,
    SPAWNER_MODULES,
    display_name,
    imports_spawner_module,
    spawner_code,
)

CODE = "CRL106"
DYNAMIC_IMPORTS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})

# -- the prefilter: a textual over-approximation of what `check` finds ------------------------------------
_MODULES = rb"(?:threading|_thread|multiprocessing|concurrent|asyncio|os|pty)\b"
# A dynamic import of a spawner module names the module in a string (the import function may be aliased).
_QUOTED_MODULE = re.compile(rb"['\"]" + _MODULES)
_QUOTED_OS = (b"'os", b'"os', b"'pty", b'"pty')
# Any star import: in a file whose imports name a spawner package, it may be one of that package's modules
# (relative ones too, inside the package itself).
_STAR_IMPORT = re.compile(rb"import" + WHITESPACE + rb"*\*")
# `getattr` named without being called: an alias, or the function passed on.
_GETATTR_UNCALLED = re.compile(rb"getattr(?![\w\x80-\xff])(?!" + WHITESPACE + rb"*\()")
# The first name of a getattr call's first argument (`threading`, `asyncio` of `asyncio.tasks`, `loop`).
_GETATTR_HEAD = re.compile(rb"getattr" + WHITESPACE + rb"*\((?:" + WHITESPACE + rb"|\()*(" + NAME + rb")")
_IMPORTS = (re.compile(rb"import(?![\w\x80-\xff])"), re.compile(rb"from(?![\w\x80-\xff])"))
_OS_OR_PTY = re.compile(rb"(?<![\w.\x80-\xff])(?:os|pty)(?![\w\x80-\xff])")
# The name an assignment's value starts with (after `(`), and whether a walrus binds it to what follows.
_VALUE_HEAD = re.compile(rb"(?:" + WHITESPACE + rb"|\()*(" + NAME + rb")(" + WHITESPACE + rb"*:=)?")
# Packages whose own modules reach spawner modules through relative imports.
_SPAWNER_PACKAGES = frozenset(module.partition(".")[0] for module in SPAWNER_MODULES if "." in module)
# How many names the prefilter follows through assignments before it gives up and admits the file.
_FOLLOW_AT_MOST = 24


def _may_reach_spawner_module(data: bytes, *, in_spawner_package: bool) -> bool:
    """Whether a getattr call may have a spawner module or an event loop as its first argument.

    As `names.py` resolves it, that argument starts with a name bound by an import of a spawner module
    (or of a loop factory or type), or assigned from a value starting with such a name (a chain of
    assignments, a factory call), or a parameter annotated with a loop type. So: the name is one of the
    words of an import statement naming a spawner package, or an assignment or annotation of it leads
    to one.
    """
    if any(starts_word(data, match.start()) for match in _GETATTR_UNCALLED.finditer(data)):
        return True
    heads = set(_GETATTR_HEAD.findall(data))
    if not heads:
        return False
    imported = _words_of_spawner_imports(data, relative_too=in_spawner_package)
    if imported is None:
        return True
    pending, seen = list(heads), set(heads)
    while pending:
        name = pending.pop()
        if name in imported:
            return True
        for followed in _names_bound_from(data, name):
            if followed is None:
                return True
            if followed not in seen:
                if len(seen) >= _FOLLOW_AT_MOST:
                    return True
                seen.add(followed)
                pending.append(followed)
    return False


def _words_of_spawner_imports(data: bytes, *, relative_too: bool) -> set[bytes] | None:
    """Every word of the import statements that name a spawner package, and of relative ones when the
    file lies inside such a package (None: a statement too long to read)."""
    words: set[bytes] = set()
    for match in (match for pattern in _IMPORTS for match in pattern.finditer(data)):
        if not starts_word(data, match.start()):
            continue
        end = logical_line_end(data, match.end())
        if end == -1:
            return None
        statement = data[match.end() : end]
        if (
            any(package in statement for package in PACKAGE_WORDS)
            or _OS_OR_PTY.search(statement)
            or (relative_too and statement.lstrip(b" \t\f\\\r\n").startswith(b"."))
        ):
            words.update(WORD.findall(statement))
    return words


@functools.lru_cache(maxsize=256)
def _binding_pattern(name: bytes) -> re.Pattern[bytes]:
    # Files of one project bind the same few names (`self`, `obj`, `loop`): each pattern is compiled once.
    return re.compile(re.escape(name) + rb"[ \t]*(?:(:)(?!=)|=(?!=))")


def _names_bound_from(data: bytes, name: bytes) -> Iterator[bytes | None]:
    """The names `name`'s bindings may resolve through: the head of each assigned value (`name = x.y`,
    `name = f()`, `name = (a := b)`) and every name of each annotation (`name: AbstractEventLoop`); None
    for a binding too long to read."""
    pattern = _binding_pattern(name)
    for match in pattern.finditer(data):
        if not starts_word(data, match.start()):
            continue
        end = logical_line_end(data, match.end())
        if end == -1:
            yield None
            continue
        value = data[match.end() : end]
        if match.group(1):
            yield from WORD.findall(value)
            continue
        position = 0
        while (head := _VALUE_HEAD.match(value, position)) is not None:
            yield head.group(1)
            if not head.group(2):
                break
            position = head.end()


_ADVICE = "outside infra; name the API inside an infra helper instead"


class HiddenSpawners(Rule, ScopedVisitor):
    codes: ClassVar[dict[str, str]] = {
        CODE: "a spawner reached through getattr, a dynamic import or a star import outside infra"
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
        make = getattr(threading, name)  # error: CRL106
        """,
        """
        import os
        fork = getattr(os, "fork")  # error: CRL106
        """,
        """
        import importlib
        mp = importlib.import_module("multiprocessing")  # error: CRL106
        """,
        """
        threading = __import__("threading")  # error: CRL106
        """,
        """
        from importlib import import_module as load
        mp = load("multiprocessing")  # error: CRL106
        """,
        """
        from concurrent.futures import *  # error: CRL106
        """,
        """
        import asyncio
        async def f():
            loop = asyncio.get_running_loop()
            return getattr(loop, "create_task")  # error: CRL106
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
            for alias, target in scope.bindings.items()
            if target in hiders
        )
        ScopedVisitor.__init__(self, context.names, lines_mentioning(context.text, words))
        self.found: list[Finding] = []

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        data = source.data
        if (
            source.has(b"__import__", b"import_module")
            and source.has(*PACKAGE_WORDS, *_QUOTED_OS)
            and _QUOTED_MODULE.search(data)
        ):
            return True
        if not source.holds(imports_spawner_module):
            return False
        in_spawner_package = source.relpath.partition("/")[0] in _SPAWNER_PACKAGES
        if source.has(b"getattr") and _may_reach_spawner_module(data, in_spawner_package=in_spawner_package):
            return True
        return _STAR_IMPORT.search(data) is not None

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        yield from self.found

    def _report(self, node: ast.AST, message: str) -> None:
        self.found.append(self.context.finding(node, CODE, message))

    def visit_Call(self, node: ast.Call) -> None:
        called = self.resolve(node.func)
        if called == "builtins.getattr" and len(node.args) >= 2:
            module = self.resolve(node.args[0])
            if module in SPAWNER_MODULES:
                attribute = node.args[1]
                shown = display_name(module)
                if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
                    self._report(
                        node,
                        f"getattr({shown}, <name>) may fetch a spawner the gate cannot see {_ADVICE}",
                    )
                elif spawner_code(f"{module}.{attribute.value}") is not None:
                    self._report(node, f"getattr({shown}, {attribute.value!r}) hides a spawner {_ADVICE}")
        elif called in DYNAMIC_IMPORTS and node.args:
            target = node.args[0]
            if isinstance(target, ast.Constant) and target.value in SPAWNER_MODULES:
                self._report(node, f"dynamic import of {target.value} hides its spawners {_ADVICE}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        origin = self.names.absolute_module(node.level, node.module)
        if origin in SPAWNER_MODULES and any(alias.name == "*" for alias in node.names):
            self._report(node, f"from {origin} import * hides its spawners {_ADVICE}")
