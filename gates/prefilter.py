"""What the prefilters read: a file's bytes with the answers rules share, and the text helpers they use.

A prefilter (`Rule.might_match`) decides from the bytes alone whether a file can hold one of its rule's
findings; only files some rule admits are parsed. Each must over-approximate its rule: a file it rules out
must not hold a finding. The helpers here read Python's layout without tokenizing it, erring towards
admitting a file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Whitespace as the tokenizer skips it between the words of a statement, line continuations included.
WHITESPACE = rb"[ \t\f\\\r\n]"
# A name as the bytes of the (NFKC-normalised, UTF-8) text spell it.
NAME = rb"[A-Za-z_\x80-\xff][\w\x80-\xff]*"
WORD = re.compile(NAME)
# Bytes that continue a name or a dotted path: a word right after one of them is not a whole word.
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_." + bytes(range(0x80, 0x100)))
# Bytes that continue an identifier (a word boundary is anything else).
_IDENTIFIER_BYTES = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_" + bytes(range(0x80, 0x100))
)
# The rest of the line after each `import` (a plain import's modules, a from-import's names) and the module
# after each `from` (past a line continuation too); both patterns start with their literal word.
_IMPORT_REST = re.compile(rb"import(?![\w\x80-\xff])([^\n]*)")
_FROM_MODULE = re.compile(rb"from(?:(?:[ \t\f]|\\\r?\n)+|(?=\.))([\w.\x80-\xff]+)")
# `from .` / `from ..pkg` with its dots (which may be spaced apart) as group 1.
RELATIVE_IMPORT = re.compile(rb"from" + WHITESPACE + rb"*(\.(?:" + WHITESPACE + rb"|\.)*)")
# A logical line longer than this many physical lines, or bytes, is not read to its end (callers then
# admit the file): reading one line per match must not make a prefilter quadratic.
LINES_AT_MOST = 50
LINE_BYTES_AT_MOST = 20_000


class Source:
    """One file's bytes as the prefilters read them, and the answers they share.

    Several rules ask the same questions of a file (does it name `asyncio`? can a call in it reach the
    network?): each substring test and each whole-file predicate runs once per file, whichever rule asks
    first. `relpath` is the file's path relative to the project root: what a relative import reaches
    depends on it.
    """

    __slots__ = ("_answers", "_imports", "data", "relpath")

    def __init__(self, data: bytes, relpath: str = "") -> None:
        self.data = data
        self.relpath = relpath
        self._answers: dict[object, bool] = {}
        self._imports: bytes | None = None

    def has(self, *words: bytes) -> bool:
        """Whether any of `words` occurs anywhere in the file."""
        answers = self._answers
        for word in words:
            answer = answers.get(word)
            if answer is None:
                answer = answers[word] = word in self.data
            if answer:
                return True
        return False

    def has_word(self, word: bytes) -> bool:
        """Whether `word` occurs in the file as a whole word (as a regular expression's `\\b` sees it)."""
        key = (word, "word")
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = _has_whole_word(self.data, word) if self.has(word) else False
        return answer

    def imports_any(self, *words: bytes) -> bool:
        """Whether any of `words` occurs in the file's import statements (see `imports`)."""
        answers = self._answers
        for word in words:
            key = (word, "imports")
            answer = answers.get(key)
            if answer is None:
                answer = answers[key] = word in self.imports
            if answer:
                return True
        return False

    @property
    def imports(self) -> bytes:
        """The text of the file's import statements, as far as a name can resolve through them: every
        module a plain `import` names, every `from` module, the file's own package path where a relative
        import resolves into it, and whatever a relative import climbing out of every package binds (as
        `names.py` resolves them). A name that resolves to a module has the module's package named here,
        so a rule about modules reads this instead of the whole file. It is the whole file when an
        `import` line is continued with a backslash, which this reading does not follow."""
        if self._imports is None:
            self._imports = _import_text(self.data, self.relpath)
        return self._imports

    def holds(self, predicate: Callable[[Source], bool]) -> bool:
        """`predicate(self)`, asked once per file whichever rule asks first."""
        answer = self._answers.get(predicate)
        if answer is None:
            answer = self._answers[predicate] = predicate(self)
        return answer


def _has_whole_word(data: bytes, word: bytes) -> bool:
    position = data.find(word)
    while position != -1:
        end = position + len(word)
        if (position == 0 or data[position - 1] not in _IDENTIFIER_BYTES) and (
            end == len(data) or data[end] not in _IDENTIFIER_BYTES
        ):
            return True
        position = data.find(word, position + 1)
    return False


def _import_text(data: bytes, relpath: str) -> bytes:
    rests = b"\n".join(_IMPORT_REST.findall(data))
    if rests.endswith((b"\\", b"\\\r")) or b"\\\n" in rests or b"\\\r\n" in rests:
        return data
    modules = _FROM_MODULE.findall(data)
    parts = [rests, *modules]
    if any(module.startswith(b".") for module in modules):
        # A relative import resolves inside the file's own package, whose names stand in for it; one that
        # climbs out of every package resolves to what it names (see `names.py`).
        package = relpath.split("/")[:-1]
        parts.extend(part.encode("utf-8", "surrogateescape") for part in package)
        for match in RELATIVE_IMPORT.finditer(data):
            if match.group(1).count(b".") - 1 >= len(package):
                end = logical_line_end(data, match.end())
                if end == -1:
                    return data
                parts.append(data[match.end() : end])
    return b"\n".join(parts)


def logical_line_end(data: bytes, start: int) -> int:
    """Where the logical line holding `start` ends (a newline outside brackets, not continued), or -1 when
    it runs on for more than `LINES_AT_MOST` lines or `LINE_BYTES_AT_MOST` bytes. Brackets inside strings
    are counted too."""
    depth = 0
    position = start
    limit = start + LINE_BYTES_AT_MOST
    for _ in range(LINES_AT_MOST):
        newline = data.find(b"\n", position, limit)
        if newline == -1:
            return len(data) if len(data) <= limit else -1
        line = data[position:newline]
        depth += sum(line.count(opener) for opener in b"([{") - sum(line.count(closer) for closer in b")]}")
        if depth <= 0 and not line.rstrip(b"\r").endswith(b"\\"):
            return newline
        position = newline + 1
    return -1


def starts_word(data: bytes, position: int) -> bool:
    """Whether a word found at `position` starts there, not inside a longer name or after a dot.

    Patterns start with their literal word and leave this test to the caller: a look-behind at the start
    of a pattern stops the regex engine from skipping ahead to the literal."""
    return position == 0 or data[position - 1] not in _NAME_BYTES
