"""The rule contract and the registry mapping every code to its message.

A rule is a small class: the codes it reports with a one-line summary each, a prefilter over the file's bytes
that rules out files which cannot hold one of its findings (`might_match`, asked of a shared `Source`), VALID
and INVALID examples beside it (a generic test turns them into test cases; INVALID lines carry
`# error: CODE`), and a `check` that yields findings.
Most rules are `ScopedVisitor`s: an `ast.NodeVisitor` that knows the scope of every node and never looks
inside type annotations or `if TYPE_CHECKING:` blocks, code that never runs.
"""

from __future__ import annotations

import ast
import functools
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.names import LOCAL, ModuleNames, Scope, arguments_of, is_type_checking_test
from corral.gates.prefilter import Source

ENGINE_CODES: dict[str, str] = {
    "CRL000": "the configuration cannot be used",
    "CRL001": "a file cannot be read, decoded or parsed, so it cannot be checked",
}


class FileContext:
    """What every rule may know about the file it checks."""

    def __init__(
        self,
        *,
        relpath: str,
        text: str,
        tree: ast.Module,
        names: ModuleNames,
        config: Config,
        is_infra: bool,
        is_test: bool,
    ) -> None:
        self.relpath = relpath
        self.text = text
        self.tree = tree
        self.names = names
        self.config = config
        self.is_infra = is_infra
        self.is_test = is_test
        self.facts: dict[str, list[object]] = {}
        # Other project files a rule read (relpath -> stamp and hash); the cached result holds while they do.
        self.dependencies: dict[str, tuple[int, int, str]] = {}

    def finding(self, node: ast.AST, code: str, message: str) -> Finding:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + 1
        return Finding(self.relpath, line, col, code, message)

    def add_fact(self, kind: str, fact: object) -> None:
        """Record what a whole-project check needs from this file (kept in the cache with the findings)."""
        self.facts.setdefault(kind, []).append(fact)


class Rule:
    """Base of every per-file rule."""

    codes: ClassVar[dict[str, str]]
    # Domain rules do not judge infra (which exists to own such code) or tests.
    skips_infra: ClassVar[bool] = True
    skips_tests: ClassVar[bool] = True
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: FileContext) -> None:
        self.context = context

    @classmethod
    def applies_to(cls, *, is_infra: bool, is_test: bool) -> bool:
        return not (cls.skips_infra and is_infra) and not (cls.skips_tests and is_test)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        """The prefilter: False only when the file cannot hold one of this rule's findings, so its parse
        can be skipped. It must never be False for a file with a finding (a test holds every rule to that
        over the fixtures and a sweep of real code); cheap substring tests on rare words come first."""
        raise NotImplementedError

    def check(self) -> Iterator[Finding]:
        raise NotImplementedError


class ScopedVisitor(ast.NodeVisitor):
    """Walks a module tracking the current scope; skips annotations and `if TYPE_CHECKING:` bodies.

    With `lines`, only statements that span one of those lines are visited: a rule that knows which words
    its findings need (an API's name, an alias bound to it) visits a handful of statements, not the module.
    """

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
        inner = Scope(parent=self.scope)
        for argument in arguments_of(node.args):
            inner.bind(argument.arg, LOCAL)
        self._visit_in_scope(inner, [node.body])

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
        if is_type_checking_test(node.test, self.names, self.scope):
            self._visit_in_scope(self.scope, node.orelse)
            return
        self.generic_visit(node)


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
