"""The scoped walker every rule and analysis uses, and the line filter that lets it visit only the statements it needs.

`scoped_parts` says, once, which parts of a node run in which scope (the scopes of
`corral.gates.analysis.names`). A `ScopedVisitor` is an `ast.NodeVisitor` that walks by it, so it knows
the scope of every node and never looks inside type annotations or `if TYPE_CHECKING:` blocks, code that
never runs; `scoped_nodes` is the same walk as a list, for the analyses that index a module's bindings.
"""

from __future__ import annotations

import ast
import functools
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from corral.gates.analysis.names import ModuleNames, Scope, is_type_checking_test
from corral.gates.analysis.nodes import children

# A node's parts, each with the scope it runs in.
Parts = list[tuple[ast.AST, Scope]]


def scoped_parts(
    node: ast.AST, scope: Scope, names: ModuleNames, *, enters_type_checking: bool = False
) -> Parts | None:
    """The parts of `node` (met in `scope`) that run, each with the scope it runs in, in field order; None
    when they are simply all its children, run in `scope`. The one statement of where code runs:

    - a function's decorators and defaults run where it is defined, its body in its scope; a class's
      decorators, bases and keywords where it is defined, its body in its scope; a lambda's defaults
      where it is written, its body in its scope; a comprehension's first iterable where it is written,
      the rest in its scope;
    - annotations (a parameter's, a variable's) are types, not code that runs;
    - the body of `if TYPE_CHECKING:` never runs (unless `enters_type_checking`: what it declares holds).
    """
    # The commonest first: a rule's walk asks for every `if`.
    if isinstance(node, ast.If):
        if not enters_type_checking and is_type_checking_test(node.test, names, scope):
            return [(part, scope) for part in node.orelse]
        return None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        outer = (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults)
        inner = names.scope_of(node)
        return [*((part, scope) for part in outer if part is not None), *((part, inner) for part in node.body)]
    if isinstance(node, ast.ClassDef):
        inner = names.scope_of(node)
        outer_parts = (*node.decorator_list, *node.bases, *node.keywords)
        return [*((part, scope) for part in outer_parts), *((part, inner) for part in node.body)]
    if isinstance(node, ast.Lambda):
        defaults = (*node.args.defaults, *node.args.kw_defaults)
        body: Parts = [(node.body, names.expression_scope(node, scope))]
        return [*((part, scope) for part in defaults if part is not None), *body]
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = names.expression_scope(node, scope)
        elements = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        first, *rest = node.generators
        return [
            *((part, inner) for part in (*elements, first.target)),
            (first.iter, scope),
            *((part, inner) for part in (*first.ifs, *rest)),
        ]
    if isinstance(node, ast.AnnAssign):
        return [(node.target, scope)] if node.value is None else [(node.target, scope), (node.value, scope)]
    if isinstance(node, ast.arg):
        return []
    return None


class ScopedVisitor(ast.NodeVisitor):
    """Walks a module tracking the current scope (as `scoped_parts` says); skips annotations and
    `if TYPE_CHECKING:` bodies.

    With `lines`, only statements that span one of those lines are visited: a rule that knows which words
    its findings need (an API's name, an alias bound to it) visits a handful of statements, not the module.
    """

    def __init__(self, names: ModuleNames, lines: Sequence[int] | None = None) -> None:
        self.names = names
        self.scope: Scope = names.root
        self.lines = lines

    def resolve(self, node: ast.expr) -> str | None:
        return self.names.resolve(node, self.scope)

    def resolve_all(self, node: ast.expr) -> list[str]:
        return self.names.resolve_all(node, self.scope)

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
        for field in node._fields:  # `ast.iter_fields` without its generator: every body the walk reaches
            value = getattr(node, field, None)
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
        self._visit_parts([(part, scope) for part in parts])

    def _visit_parts(self, parts: Parts) -> None:
        outer = self.scope
        try:
            for part, scope in parts:
                if not isinstance(part, ast.stmt) or self._spans_line(part):
                    self.scope = scope
                    self.visit(part)
        finally:
            self.scope = outer

    def _visit_scoped(self, node: ast.AST) -> None:
        parts = scoped_parts(node, self.scope, self.names)
        if parts is None:
            self.generic_visit(node)
        else:
            self._visit_parts(parts)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_scoped(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_scoped(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_scoped(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_scoped(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_scoped(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_scoped(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_scoped(node)

    def visit_arg(self, node: ast.arg) -> None:
        """Parameters are bindings and their annotations are types: nothing here runs."""

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_scoped(node)

    def visit_If(self, node: ast.If) -> None:
        self._visit_scoped(node)


def scoped_nodes(tree: ast.Module, names: ModuleNames) -> Iterator[tuple[ast.AST, Scope]]:
    """Every node of the module that runs, in source order, with the scope it runs in (as `scoped_parts`
    says, so as a `ScopedVisitor` walks), for the analyses that index what names are bound to. Unlike a
    rule's walk, `if TYPE_CHECKING:` bodies are included: what they declare holds. Annotations are not:
    an index reads a parameter's or a variable's annotation from its function or assignment. A binding
    lands in `scope.home(name)`, not always `scope`. Iterative, so no nesting depth exhausts the stack."""
    found: list[tuple[ast.AST, Scope]] = []
    pending: Parts = [(tree, names.root)]
    while pending:
        node, scope = pending.pop()
        found.append((node, scope))
        parts = scoped_parts(node, scope, names, enters_type_checking=True)
        if parts is None:
            parts = [(child, scope) for child in children(node)]
        pending.extend(reversed(parts))
    return iter(found)


def lines_mentioning(text: str, words: Iterable[str]) -> list[int]:
    """The sorted 1-based numbers of the lines of `text` that contain one of `words` (none empty) as a whole word:
    the matches of `\\b(?:word|...)\\b`, found without its leading `\\b`, which keeps `re` from skipping ahead to
    the characters a word starts with; a match where no word starts is searched past by one character."""
    pattern = _word_pattern(frozenset(words))
    found: list[int] = []
    position = 0
    line = 1
    match = pattern.search(text)
    while match is not None:
        start = match.start()
        if (start > 0 and _is_word(text[start - 1])) == _is_word(text[start]):
            match = pattern.search(text, start + 1)
            continue
        line += text.count("\n", position, start)
        position = start
        if not found or found[-1] != line:
            found.append(line)
        match = pattern.search(text, match.end())
    return found


def _is_word(character: str) -> bool:
    """Whether `re` counts `character` as a word character (`\\w` in a str pattern)."""
    return character.isalnum() or character == "_"


@functools.lru_cache(maxsize=64)
def _word_pattern(words: frozenset[str]) -> re.Pattern[str]:
    # Most files of a run ask for the same words (aliases are rare), so the pattern is compiled once.
    return re.compile(r"(?:" + "|".join(sorted(re.escape(word) for word in words)) + r")\b")
