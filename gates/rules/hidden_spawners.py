"""CRL106: spawners reached in ways a reader (or a simpler linter) cannot see.

`getattr` on a spawner module with a name the gate cannot read or with a spawner's name, importing such a
module through `__import__` / `importlib.import_module`, and `from <spawner module> import *`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.registry import FileContext, Rule, ScopedVisitor, lines_mentioning
from corral.gates.spawners import SPAWNER_MODULES, display_name, spawner_code

CODE = "CRL106"
DYNAMIC_IMPORTS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
_MODULES = rb"(?:threading|_thread|multiprocessing|concurrent|asyncio|os|pty)\b"
_GETATTR_TARGET = re.compile(rb"getattr\(\s*([A-Za-z_]\w*)\s*,")
# A dynamic import of a spawner module names the module in a string (the import function may be aliased).
_QUOTED_MODULE = re.compile(rb"['\"]" + _MODULES)
_STAR_IMPORT = re.compile(rb"from\s+" + _MODULES + rb"[\w.]*\s+import\s+\*")
# Names a plain `import` or `from ... import` binds to a spawner module (or one of its submodules).
_MODULE_NAMES = frozenset(
    {b"threading", b"_thread", b"multiprocessing", b"concurrent", b"futures", b"asyncio", b"os", b"pty"}
    | {b"pool", b"dummy", b"context", b"process", b"thread", b"tasks", b"events", b"base_events"}
)
_IMPORTS_A_SPAWNER_MODULE = re.compile(
    rb"thread|multiprocessing|concurrent|asyncio|pty|import[ \t]+os\b|from[ \t]+os\b|,[ \t]*os\b"
)
_IMPORT_ALIAS = re.compile(rb" as\s+([A-Za-z_]\w*)(?![\w.])")
# What the line of an assignment or annotation must mention to bind a name to a spawner module or a loop.
_MODULE_WORDS = re.compile(rb"thread|multiprocessing|concurrent|futures|asyncio|os|pty|loop|Loop|get_context")
# How a name is assigned or annotated, as formatted code writes it (searched with `bytes.find`, which is
# far cheaper than a regular expression compiled for every name).
_BINDERS = (b" =", b"=", b"\t=", b"  =", b":", b" :")


def _assigned_from_module(data: bytes, name: bytes) -> bool:
    for binder in _BINDERS:
        needle = name + binder
        position = data.find(needle)
        while position != -1:
            before = data[position - 1 : position]
            end = position + len(needle)
            if not (before.isalnum() or before in (b"_", b".")) and data[end : end + 1] != b"=":
                line_end = data.find(b"\n", end)
                if _MODULE_WORDS.search(data, end, line_end if line_end != -1 else len(data)):
                    return True
            position = data.find(needle, end)
    return False


_ADVICE = "outside infra; name the API inside an infra helper instead"


class HiddenSpawners(Rule, ScopedVisitor):
    codes: ClassVar[dict[str, str]] = {
        CODE: "a spawner reached through getattr, a dynamic import or a star import outside infra"
    }
    triggers = (b"getattr", b"__import__", b"import_module", b"import *")

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
    def might_match(cls, data: bytes, config: Config) -> bool:
        """A textual over-approximation of what `check` can find: a getattr whose first argument is a
        name imported, assigned or annotated from a spawner module or loop, a dynamic import naming
        such a module, or a star import from one."""
        if b"getattr" in data:
            targets = set(_GETATTR_TARGET.findall(data))
            if targets & _MODULE_NAMES or targets & set(_IMPORT_ALIAS.findall(data)):
                return True
            # An assignment can only bind a spawner module (or a loop) the file itself imports.
            if _IMPORTS_A_SPAWNER_MODULE.search(data) and any(_assigned_from_module(data, name) for name in targets):
                return True
        if (b"__import__" in data or b"import_module" in data) and _QUOTED_MODULE.search(data):
            return True
        return b"import" in data and b"*" in data and _STAR_IMPORT.search(data) is not None

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
