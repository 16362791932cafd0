"""Lowering of Python syntax newer than the running interpreter into source its `ast` accepts.

This module owns the fallback parse: libcst's native parser reads every version's grammar (3.0 to 3.15), so
a file the running `ast` rejects is parsed with libcst, the constructs the running version lacks are
rewritten in the source text, and the result goes to `ast.parse`. The rules report `line:col` of calls,
decorators and keyword values, so every rewrite keeps the text's line breaks, and nearly all keep its
UTF-8 width too, which leaves the columns `ast` reports where they were. What is rewritten, and when:

- 3.11: `except*` becomes `except`; `*Ts` in subscripts and `*args: *Ts` lose the star.
- 3.12: PEP 695 type parameter lists are blanked and `type X = v` becomes `(    X)= v`; f-strings the running
  `ast` rejects (PEP 701 quotes, backslashes, comments, line breaks) become tuples of their replacement
  field expressions, each expression left where it was.
- 3.13: PEP 696 type parameter defaults are blanked (on 3.12, which keeps the parameters).
- 3.14: `except A, B:` is parenthesised (PEP 758); t-strings (PEP 750) become tuples like f-strings.
- 3.15: `lazy import` / `lazy from` become plain imports (PEP 810); `*x` / `**d` unpacking in
  comprehensions loses its stars (PEP 798).

Type parameter bounds and defaults are dropped with the parameters, so calls written inside them are not
seen. Anything else `ast` rejects after lowering is a genuine syntax error and raises `SyntaxError`.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import TypeAlias

import libcst as cst
from libcst.metadata import PositionProvider

_VERSION = sys.version_info[:2]
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# A blanked span outside brackets must end each of its lines in a continuation backslash; blanks are
# spaces, so the space before each line break becomes that backslash (or one is added on an empty line).
_BREAK_IN_BLANK = re.compile(r" ?(\r\n|\r|\n)")
# The native parser's message carries the real position; its raw_line/raw_column often do not.
_ERROR_AT = re.compile(r"error at (\d+):(\d+)")
# libcst's native parser recurses on the machine stack and crashes the process (no RecursionError) on
# inputs nested ~1500 brackets deep or chaining ~5000 operators; its Python side already raises
# RecursionError past a few hundred chained operators. A token scan bounds both before libcst runs.
_MAX_BRACKET_DEPTH = 500  # valid Python never exceeds 200 (the tokenizer's limit)
_MAX_CHAIN = 2000  # tokens in one run free of commas and line breaks, counting enclosing brackets
_TOKEN = re.compile(
    r"(?P<skip>[ \t\f]+|\\\r?\n|#[^\r\n]*)"
    r"|(?P<newline>\r\n|\r|\n)"
    r"|(?P<string>[A-Za-z]{0,2}(?:'''(?:[^\\]|\\.)*?'''"
    r'|"""(?:[^\\]|\\.)*?"""'
    r"|'(?:[^'\\\r\n]|\\.)*'?"
    r'|"(?:[^"\\\r\n]|\\.)*"?))'
    r"|(?P<open>[(\[{])"
    r"|(?P<close>[)\]}])"
    r"|(?P<separator>[,;])"
    r"|(?P<other>\w+|.)",
    re.DOTALL,
)
# Renders detached whitespace nodes, whose widths locate the tokens around them.
_CODEGEN = cst.Module(body=())

_String: TypeAlias = cst.SimpleString | cst.FormattedString | cst.TemplatedString
_Field: TypeAlias = cst.FormattedStringExpression | cst.TemplatedStringExpression


def parse_lowered(source: str, filename: str) -> ast.Module:
    """Parse `source` with libcst's newest grammar, rewrite constructs the running `ast` rejects into
    equivalents it accepts (keeping every line number and, where possible, column of the names that remain),
    and return ast.parse of the result. Raise SyntaxError (with lineno/offset where libcst gives them) when
    libcst cannot parse it either."""
    return ast.parse(lower_source(source, filename), filename)


def lower_source(source: str, filename: str) -> str:
    """`source` with the constructs the running `ast` rejects rewritten, line for line."""
    _check_nesting(source)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise _syntax_error(error, source, filename) from error
    except (cst.CSTValidationError, cst.CSTLogicError) as error:
        # Raised while building nodes: bytes concatenated with str, and (libcst 1.9) any concatenation
        # whose right-hand literal is a t-string.
        raise SyntaxError(str(error), (filename, None, None, None)) from error
    lowerer = _Lowerer(source)
    cst.MetadataWrapper(module, unsafe_skip_copy=True).visit(lowerer)
    return lowerer.lowered()


def _check_nesting(source: str) -> None:
    """Raise RecursionError for source nested deeper than libcst's parser survives.

    Each bracket level keeps a count of the tokens since its last separator or line break; their sum
    bounds the depth of the tree libcst would build. Strings and comments are skipped, so brackets in them
    do not count. The string pattern cannot follow PEP 701 quotes nested in f-strings, and a bracket in such
    a nested literal looks unbalanced; resetting at every line break keeps that error to one line, at the
    price of not seeing operator chains that span thousands of lines.
    """
    counts = [0]
    total = 0
    for token in _TOKEN.finditer(source):
        kind = token.lastgroup
        if kind == "close":
            if len(counts) > 1:
                total -= counts.pop()
        elif kind in ("separator", "newline"):
            total -= counts[-1]
            counts[-1] = 0
        elif kind in ("open", "string", "other"):
            counts[-1] += 1
            total += 1
            if kind == "open":
                counts.append(0)
            if len(counts) > _MAX_BRACKET_DEPTH:
                raise RecursionError(f"brackets nested more than {_MAX_BRACKET_DEPTH} deep")
            if total > _MAX_CHAIN:
                raise RecursionError(f"more than {_MAX_CHAIN} tokens in one nested expression")


def _syntax_error(error: cst.ParserSyntaxError, source: str, filename: str) -> SyntaxError:
    position = _ERROR_AT.search(error.message)
    line, column = (int(position[1]), int(position[2])) if position else (error.raw_line, error.raw_column)
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else None
    return SyntaxError(error.message, (filename, line, column + 1, text))


def _width(char: str) -> int:
    # `ast` columns count UTF-8 bytes, so a blank must be as wide in bytes as what it replaces.
    return len(char.encode("utf-8", "surrogatepass"))


def _overlay(word: str, blank: str) -> str:
    """`blank` (a blanked span) with `word` written over its start, keeping its line breaks."""
    width = sum(map(_width, word))
    first, *rest = _LINE_BREAK.split(blank, maxsplit=1)
    if not rest:
        return word + first[width:]
    # The first line ends in a continuation backslash, which must stay.
    head = word + first[width:] if width < len(first) else word + "\\"
    return head + blank[len(first) :]


def _strings(node: cst.BaseString) -> Iterator[_String]:
    """The literals of an implicit concatenation, in source order."""
    if isinstance(node, cst.ConcatenatedString):
        yield from _strings(node.left)
        yield from _strings(node.right)
    elif isinstance(node, (cst.SimpleString, cst.FormattedString, cst.TemplatedString)):
        yield node


def _fields(parts: Sequence[cst.CSTNode]) -> Iterator[_Field]:
    """The replacement fields of an f- or t-string, nested format-spec fields after their owner."""
    for part in parts:
        if isinstance(part, (cst.FormattedStringExpression, cst.TemplatedStringExpression)):
            yield part
            if part.format_spec:
                yield from _fields(part.format_spec)


def _needs_parentheses(expression: cst.BaseExpression) -> bool:
    """Whether a replacement field's expression cannot stand as a tuple element without parentheses."""
    return isinstance(expression, (cst.Yield, cst.Tuple)) and not expression.lpar


class _Lowerer(cst.CSTVisitor):
    """Collects text edits, each replacing a span of the source with text that has the same line breaks."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, source: str) -> None:
        super().__init__()
        self._source = source
        self._line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(source)]
        self._edits: list[tuple[int, int, str]] = []

    def lowered(self) -> str:
        pieces: list[str] = []
        cursor = 0
        # Sorting puts an insertion before a replacement that starts at the same offset.
        for start, end, text in sorted(self._edits):
            pieces += (self._source[cursor:start], text)
            cursor = end
        pieces.append(self._source[cursor:])
        return "".join(pieces)

    # Positions -------------------------------------------------------------------------------------

    def _offset(self, line: int, column: int) -> int:
        return self._line_starts[line - 1] + column

    def _start(self, node: cst.CSTNode) -> int:
        start = self.get_metadata(PositionProvider, node).start
        return self._offset(start.line, start.column)

    def _end(self, node: cst.CSTNode) -> int:
        end = self.get_metadata(PositionProvider, node).end
        return self._offset(end.line, end.column)

    def _expression_span(self, node: cst.BaseExpression) -> tuple[int, int]:
        """An expression's span including its own parentheses, which positions leave out."""
        return self._start(node.lpar[0] if node.lpar else node), self._end(node.rpar[-1] if node.rpar else node)

    # Edits -----------------------------------------------------------------------------------------

    def _blank_text(self, start: int, end: int, marks: dict[int, str], *, bracketed: bool) -> str:
        """The span as spaces of equal width with its line breaks kept, `marks` written at their offsets."""
        pieces = []
        for offset in range(start, end):
            char = self._source[offset]
            if offset in marks:
                pieces.append(marks[offset])
            elif char in "\r\n":
                pieces.append(char)
            else:
                pieces.append(" " * _width(char))
        text = "".join(pieces)
        return text if bracketed else _BREAK_IN_BLANK.sub(r"\\\1", text)

    def _blank(self, start: int, end: int, *, bracketed: bool) -> None:
        self._edits.append((start, end, self._blank_text(start, end, {}, bracketed=bracketed)))

    def _retoken(self, start: int, end: int, word: str) -> None:
        """Replace a statement's leading keywords (`start` is where the statement begins) with `word`."""
        self._edits.append((start, end, _overlay(word, self._blank_text(start, end, {}, bracketed=False))))

    # 3.11: except*, starred subscripts and annotations (PEP 654, PEP 646) -----------------------------

    def visit_ExceptStarHandler(self, node: cst.ExceptStarHandler) -> bool:
        star = self._start(node) + len("except") + len(node.whitespace_after_except.value)
        if _VERSION < (3, 11):
            self._blank(star, star + 1, bracketed=True)
        self._parenthesize_types(node, star)
        return True

    def visit_Index(self, node: cst.Index) -> bool:
        if node.star is not None and _VERSION < (3, 11):
            start = self._start(node)
            self._blank(start, start + 1, bracketed=True)
        return True

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        if isinstance(node.annotation, cst.StarredElement) and _VERSION < (3, 11):
            start = self._start(node.annotation)
            self._blank(start, start + 1, bracketed=True)
        return True

    # 3.12 and 3.13: type parameters, defaults and aliases (PEP 695, PEP 696) ---------------------------

    def visit_TypeParameters(self, node: cst.TypeParameters) -> bool:
        if _VERSION >= (3, 12):
            return True
        self._blank(self._start(node), self._end(node), bracketed=False)
        return False

    def visit_TypeParam(self, node: cst.TypeParam) -> bool:
        if node.default is None or _VERSION >= (3, 13):
            return True
        self._blank(self._end(node.param), self._expression_span(node.default)[1], bracketed=True)
        node.param.visit(self)
        return False

    def visit_TypeAlias(self, node: cst.TypeAlias) -> bool:
        if _VERSION < (3, 12):
            # `type X[T] = v` becomes `(    X   )= v`: a parenthesised target keeps the name in place.
            start = self._start(node)
            self._edits.append((start, start + len("type"), "(   "))
            self._close_after(self._end(node.type_parameters or node.name))
        return True

    # 3.12 and 3.14: f-strings and t-strings (PEP 701, PEP 750) ----------------------------------------

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> bool:
        return self._visit_string(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        return self._visit_string(node)

    def visit_TemplatedString(self, node: cst.TemplatedString) -> bool:
        return self._visit_string(node)

    def _visit_string(self, node: cst.BaseString) -> bool:
        """Lower a whole literal (concatenations as one) unless the running `ast` reads it as written."""
        start, end = self._start(node), self._end(node)
        if self._accepted(self._source[start:end]):
            return False
        strings = list(_strings(node))
        templates = sum(isinstance(string, cst.TemplatedString) for string in strings)
        if 0 < templates < len(strings):
            return False  # t-strings concatenated with other literals are invalid on every version
        # The literal becomes a parenthesised tuple: its first and last characters turn into the
        # parentheses, each field expression stays in place followed by a comma, and the rest is blanked.
        marks = {start: "(", end - 1: ")"}
        fields = [
            field for string in strings if not isinstance(string, cst.SimpleString) for field in _fields(string.parts)
        ]
        cursor = start
        for field in fields:
            expression_start, expression_end = self._expression_span(field.expression)
            comma = expression_end
            while self._source[comma] in "\r\n":
                comma += 1
            if _needs_parentheses(field.expression):
                marks[self._start(field)] = "("
                marks[comma] = "),"
            else:
                marks[comma] = ","
            self._edits.append(
                (cursor, expression_start, self._blank_text(cursor, expression_start, marks, bracketed=True))
            )
            cursor = expression_end
        self._edits.append((cursor, end, self._blank_text(cursor, end, marks, bracketed=True)))
        for field in fields:
            field.expression.visit(self)
        return False

    @staticmethod
    def _accepted(literal: str) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes in the literal are no reason to rewrite it
                ast.parse(f"(\n{literal}\n)", mode="eval")
        except SyntaxError:
            return False
        return True

    # 3.14: unparenthesised exception tuples (PEP 758) -----------------------------------------------

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
        self._parenthesize_types(node, None)
        return True

    def _parenthesize_types(self, node: cst.ExceptHandler | cst.ExceptStarHandler, star: int | None) -> None:
        types = node.type
        # PEP 758 still requires parentheses with `as`, so such a handler is left to fail.
        if _VERSION >= (3, 14) or node.name is not None or not isinstance(types, cst.Tuple) or types.lpar:
            return
        start = self._start(types)
        # Overwriting the blank before the tuple keeps the columns of what follows.
        if start - 1 != star and self._source[start - 1] in " \t":
            self._edits.append((start - 1, start, "("))
        else:
            self._edits.append((start, start, "("))
        self._close_after(self._end(types))

    def _close_after(self, offset: int) -> None:
        """Add a closing parenthesis at `offset`, over a blank there so that the rest of the line stays put."""
        self._edits.append((offset, offset + 1 if self._source[offset] in " \t" else offset, ")"))

    # 3.15: lazy imports (PEP 810) and unpacking in comprehensions (PEP 798) ------------------------------

    def visit_LazyImport(self, node: cst.LazyImport) -> bool:
        if _VERSION < (3, 15):
            start = self._start(node)
            self._retoken(start, start + len("lazy") + len(node.whitespace_after_lazy.value) + len("import"), "import")
        return True

    def visit_LazyImportFrom(self, node: cst.LazyImportFrom) -> bool:
        if _VERSION < (3, 15):
            start = self._start(node)
            self._retoken(start, start + len("lazy") + len(node.whitespace_after_lazy.value) + len("from"), "from")
        return True

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        self._unstar_element(node.elt)
        return True

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        self._unstar_element(node.elt)
        return True

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        self._unstar_element(node.elt)
        return True

    def _unstar_element(self, element: cst.BaseExpression) -> None:
        if isinstance(element, cst.StarredElement) and _VERSION < (3, 15):
            start = self._start(element)
            self._blank(start, start + 1, bracketed=True)

    def visit_StarredDictComp(self, node: cst.StarredDictComp) -> bool:
        if _VERSION < (3, 15):
            value_start = self._expression_span(node.value)[0]
            stars = value_start - len(_CODEGEN.code_for_node(node.whitespace_before_value)) - len("**")
            self._blank(stars, stars + 2, bracketed=True)
        return True
