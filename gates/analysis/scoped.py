"""The scoped walker every rule and analysis uses, and the line filter that lets it visit only the statements it needs.

A `ScopedVisitor` is an `ast.NodeVisitor` that knows the scope of every node (the scopes of
`corral.gates.analysis.names`: decorators, defaults, bases and a comprehension's first iterable run in the
enclosing scope; a function's, class's, lambda's or comprehension's own parts in its scope) and never
looks inside type annotations or `if TYPE_CHECKING:` blocks, code that never runs. `scoped_nodes` is the
same walk as a list, for the analyses that index a module's bindings.
"""

from __future__ import annotations

import ast
import functools
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

from corral.gates.analysis.names import Comprehension, ModuleNames, Scope, is_type_checking_test


class ScopedVisitor(ast.NodeVisitor):
    """Walks a module tracking the current scope; skips annotations and `if TYPE_CHECKING:` bodies.

    With `lines`, only statements that span one of those lines are visited: a rule that knows which words
    its findings need (an API's name, an alias bound to it) visits a handful of statements, not the module.
    """

    # Whether `if TYPE_CHECKING:` bodies are walked: they never run, but what they declare a name to hold
    # (`client: httpx.Client`) holds where the name is used.
    enters_type_checking: ClassVar[bool] = False

    def __init__(self, names: ModuleNames, lines: Sequence[int] | None = None) -> None:
        self.names = names
        self.scope: Scope = names.root
        self.lines = lines

    def resolve(self, node: ast.expr) -> str | None:
        return self.names.resolve(node, self.scope)

    def _spans_line(self, statement: ast.stmt) -> bool:
        lines = self.lines
        if lines is None:
            return True
        start = statement.lineno
        decorators = getattr(statement, "decorator_list", None)
        if decorators:
            start = min(start, *(decorator.lineno for decorator in decorators))
        index = bisect_left(lines, start)
        return index < len(lines) and lines[index] <= (statement.end_lineno or statement.lineno)

    def generic_visit(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.stmt):
                        if self._spans_line(item):
                            self.visit(item)
                    elif isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _visit_in_scope(self, scope: Scope, parts: Sequence[ast.AST]) -> None:
        outer = self.scope
        self.scope = scope
        try:
            for part in parts:
                if not isinstance(part, ast.stmt) or self._spans_line(part):
                    self.visit(part)
        finally:
            self.scope = outer

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Decorators and defaults run in the enclosing scope; annotations are not code that runs here.
        for expression in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        self._visit_in_scope(self.names.scope_of(node), node.body)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in (*node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        self._visit_in_scope(self.names.expression_scope(node, self.scope), [node.body])

    def _visit_comprehension(self, node: Comprehension, elements: Sequence[ast.expr]) -> None:
        # In the fields' order; only the first iterable is evaluated where the comprehension is written.
        inner = self.names.expression_scope(node, self.scope)
        first, *rest = node.generators
        self._visit_in_scope(inner, [*elements, first.target])
        self.visit(first.iter)
        self._visit_in_scope(inner, [*first.ifs, *rest])

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_comprehension(node, [node.key, node.value])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in (*node.decorator_list, *node.bases, *node.keywords):
            self.visit(expression)
        self._visit_in_scope(self.names.scope_of(node), node.body)

    def visit_arg(self, node: ast.arg) -> None:
        """Parameters are bindings and their annotations are types: nothing here runs."""

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_If(self, node: ast.If) -> None:
        if not self.enters_type_checking and is_type_checking_test(node.test, self.names, self.scope):
            self._visit_in_scope(self.scope, node.orelse)
            return
        self.generic_visit(node)


class _EveryNode(ScopedVisitor):
    enters_type_checking = True

    def __init__(self, names: ModuleNames) -> None:
        super().__init__(names)
        self.found: list[tuple[ast.AST, Scope]] = []

    def visit(self, node: ast.AST) -> None:
        self.found.append((node, self.scope))
        super().visit(node)


def scoped_nodes(tree: ast.Module, names: ModuleNames) -> Iterator[tuple[ast.AST, Scope]]:
    """Every node of the module a `ScopedVisitor` walks, in source order, with the scope it runs in, for
    the analyses that index what names are bound to. `if TYPE_CHECKING:` bodies are included (what they
    declare holds), annotations are not: an index reads a parameter's or a variable's annotation from its
    function or assignment. A binding lands in `scope.home(name)`, not always `scope`."""
    walker = _EveryNode(names)
    walker.visit(tree)
    return iter(walker.found)


def lines_mentioning(text: str, words: Iterable[str]) -> list[int]:
    """The sorted 1-based numbers of the lines of `text` that contain one of `words` as a whole word."""
    pattern = _word_pattern(frozenset(words))
    found: list[int] = []
    position = 0
    line = 1
    for match in pattern.finditer(text):
        line += text.count("\n", position, match.start())
        position = match.start()
        if not found or found[-1] != line:
            found.append(line)
    return found


@functools.lru_cache(maxsize=64)
def _word_pattern(words: frozenset[str]) -> re.Pattern[str]:
    # Most files of a run ask for the same words (aliases are rare), so the pattern is compiled once.
    return re.compile(r"\b(?:" + "|".join(sorted(re.escape(word) for word in words)) + r")\b")
