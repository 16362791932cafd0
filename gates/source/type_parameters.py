"""Lowering PEP 695 type parameter lists and `type` aliases with the standard tokenizer, without libcst.

The one construct of Python 3.12 real projects already write (saleor: 11 of 4,338 files) is also the one a
token scan can lower: `lowering.py` blanks a `[...]` type parameter list after a `def` or `class` name and
turns `type X = v` into `(   X)= v`, and this module makes those same edits from the tokens, so a file that
needs nothing else is checked without importing libcst (~100 ms in each process that parses such a file).
Only shapes the scan can vouch for are lowered here: each parameter a name (`*Ts`, `**P` without a bound or
default), each bound or default an expression the running `ast` reads. Anything else, or a result the running
`ast` still rejects, answers None, and `lowering.py` decides, as for any other newer syntax.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import warnings

# Blanks as `lowering.py` writes them (which loads standalone in the tests, so shares nothing with this module):
# a blanked span outside brackets ends each of its lines in a continuation backslash, put in place of the space
# before each line break (or added on an empty line).
_BREAK_IN_BLANK = re.compile(r" ?(\r\n|\r|\n)")
# Tokens after which a statement starts: where `type` opens an alias, not a name in an expression.
_STATEMENT_STARTS = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT})
# Left out of the scan (so a statement starts after a NEWLINE, INDENT or DEDENT, whatever blank lines follow).
_SKIPPED = frozenset({tokenize.NL, tokenize.COMMENT})
_OPENERS, _CLOSERS = "([{", ")]}"


def _blank(text: str) -> str:
    """`text` as spaces of the same widths in `ast` columns (UTF-8 bytes), its line breaks kept, each with the
    continuation backslash it needs outside brackets."""
    blanked = "".join(char if char in "\r\n" else " " * len(char.encode("utf-8", "surrogatepass")) for char in text)
    return _BREAK_IN_BLANK.sub(r"\\\1", blanked)


def lower_type_parameters(source: str) -> ast.Module | None:
    """The module `lowering.lower_source` would make of `source` when its only newer syntax is PEP 695 type
    parameter lists and aliases of the shapes above, parsed; None when it cannot tell."""
    if sys.version_info >= (3, 12) or "\r" in source.replace("\r\n", ""):
        return None  # the running `ast` reads them itself; a bare carriage return the scan does not follow
    try:
        scan = _Scan(source)
    except (tokenize.TokenError, SyntaxError):
        return None
    edits = scan.edits()
    if not edits:
        return None
    pieces: list[str] = []
    cursor = 0
    for start, end, text in sorted(edits):
        pieces += (source[cursor:start], text)
        cursor = end
    pieces.append(source[cursor:])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse("".join(pieces))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


class _Scan:
    """The significant tokens of one source (comments and blank lines left out), and the edits they call for."""

    def __init__(self, source: str) -> None:
        self.source = source
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        self.tokens = [token for token in tokens if token.type not in _SKIPPED]
        # The tokenizer's lines end at `\n` only.
        self.starts = [0, *(match.end() for match in re.finditer("\n", source))]

    def offset(self, position: tuple[int, int]) -> int:
        return self.starts[position[0] - 1] + position[1]

    def edits(self) -> list[tuple[int, int, str]] | None:
        """The edits of `lowering.py` for every type parameter list and alias; None for one of another shape."""
        tokens, source = self.tokens, self.source
        edits: list[tuple[int, int, str]] = []
        for place, token in enumerate(tokens[:-2]):
            name, after = tokens[place + 1], tokens[place + 2]
            if token.type != tokenize.NAME or name.type != tokenize.NAME:
                continue
            if token.string in ("def", "class") and after.string == "[":
                end = self._parameters_end(place + 2)
                if end is None:
                    return None
                start = self.offset(after.start)
                edits.append((start, end, _blank(source[start:end])))
            elif (
                token.string == "type"
                and (place == 0 or tokens[place - 1].type in _STATEMENT_STARTS)
                and after.string in ("=", "[")
            ):
                name_end = self.offset(name.end)
                if after.string == "[":
                    parameters_end = self._parameters_end(place + 2)
                    if parameters_end is None:
                        return None
                    edits.append((name_end, parameters_end, _blank(source[name_end:parameters_end])))
                    name_end = parameters_end
                start = self.offset(token.start)
                edits.append((start, start + len("type"), "(   "))
                # The closing parenthesis goes over the blank after the name, or is inserted without one.
                after_name = name_end + 1 if source[name_end : name_end + 1] in (" ", "\t") else name_end
                edits.append((name_end, after_name, ")"))
        return edits

    def _parameters_end(self, place: int) -> int | None:
        """Where the type parameter list opening at token `place` ends (past its `]`), when every parameter
        has a shape this module lowers; None otherwise."""
        depth = 0
        parameters: list[list[tokenize.TokenInfo]] = [[]]
        for token in self.tokens[place:]:
            if token.type == tokenize.OP and token.string in _OPENERS:
                depth += 1
                if depth == 1:
                    continue
            elif token.type == tokenize.OP and token.string in _CLOSERS:
                depth -= 1
                if depth == 0:
                    if not parameters[-1] and len(parameters) > 1:
                        parameters.pop()  # a trailing comma
                    lowerable = all(self._lowerable(parameter) for parameter in parameters)
                    return self.offset(token.end) if lowerable else None
            elif depth == 1 and token.type == tokenize.OP and token.string == ",":
                parameters.append([])
                continue
            elif token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                return None
            parameters[-1].append(token)
        return None

    def _lowerable(self, parameter: list[tokenize.TokenInfo]) -> bool:
        """Whether one type parameter is `name`, `name: bound`, `name = default`, `name: bound = default`,
        `*name` or `**name`, with each bound or default an expression the running `ast` reads."""
        if parameter and parameter[0].string in ("*", "**"):
            return len(parameter) == 2 and parameter[1].type == tokenize.NAME
        if not parameter or parameter[0].type != tokenize.NAME:
            return False
        rest = parameter[1:]
        while rest:
            if rest[0].string not in (":", "=") or len(rest) < 2:
                return False
            default = next((place for place, token in enumerate(rest[1:], 1) if token.string == "="), len(rest))
            if rest[0].string == "=" and default != len(rest):
                return False  # something after the default
            expression = self.source[self.offset(rest[1].start) : self.offset(rest[default - 1].end)]
            try:
                ast.parse(f"(\n{expression}\n)", mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return False
            rest = rest[default:]
        return True
