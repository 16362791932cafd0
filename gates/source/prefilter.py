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
_FROM_MODULE = re.compile(rb"from(?:(?:[ \t\f]|\\(?:\r\n|\r|\n))+|(?=\.))([\w.\x80-\xff]+)")
# `from .` / `from ..pkg` with its dots (which may be spaced apart) as group 1.
RELATIVE_IMPORT = re.compile(rb"from" + WHITESPACE + rb"*(\.(?:" + WHITESPACE + rb"|\.)*)")
# A logical line longer than this many physical lines, or bytes, is not read to its end, and the reads of
# one file stop after a few times its length (callers then admit the file): reading a line per match
# must not make a prefilter quadratic.
LINES_AT_MOST = 50
LINE_BYTES_AT_MOST = 20_000
_READ_BUDGET_FILES = 4
_READ_BUDGET_EXTRA = 65_536


class Source:
    """One file's bytes as the prefilters read them, and the answers they share.

    Several rules ask the same questions of a file (does it name `asyncio`? can a call in it reach the
    network?): each substring test and each whole-file predicate runs once per file, whichever rule asks
    first. `relpath` is the file's path relative to the project root `root`: what a relative import reaches
    depends on it. A prefilter that reads more than the file's bytes (a summary of the project) records
    what it read in `dependencies`, as a rule does: a file it ruled out is then rechecked when that changes.
    """

    __slots__ = ("_answers", "_imports", "_package", "data", "dependencies", "relpath", "root")

    def __init__(self, data: bytes, relpath: str = "", root: str | None = None) -> None:
        self.data = data
        self.relpath = relpath
        # The project's root: the file's module is named from its package root below it.
        self.root = root
        self.dependencies: dict[str, tuple[int, int, str]] = {}
        self._answers: dict[object, bool] = {}
        self._imports: bytes | None = None
        self._package: list[str] | None = None

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
    def package(self) -> list[str]:
        """The parts of the package the file's relative imports resolve in, as `discovery.module_name_for` names it (a
        file named `a.b.py` is module `a.b`, in package `a`)."""
        if self._package is None:
            from corral.gates.source.discovery import module_name_for

            module, is_package = module_name_for(self.relpath, self.root)
            package = module if is_package else module.rpartition(".")[0]
            self._package = package.split(".") if package else []
        return self._package

    @property
    def imports(self) -> bytes:
        """The text of the file's import statements, as far as a name can resolve through them: every
        module a plain `import` names, every `from` module, the file's own package path where a relative
        import resolves into it, and whatever a relative import climbing out of every package binds (as
        `names.py` resolves them). A name that resolves to a module has the module's package named here,
        so a rule about modules reads this instead of the whole file. It is the whole file when an
        `import` line is continued with a backslash, which this reading does not follow."""
        if self._imports is None:
            self._imports = _import_text(self.data, self)
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


def _import_text(data: bytes, source: Source) -> bytes:
    rests = b"\n".join(_IMPORT_REST.findall(data))
    if rests.endswith((b"\\", b"\\\r")) or b"\\\n" in rests or b"\\\r" in rests:
        return data
    modules = _FROM_MODULE.findall(data)
    parts = [rests, *modules]
    if any(module.startswith(b".") for module in modules):
        # A relative import resolves inside the file's own package, whose names stand in for it; one that
        # climbs out of every package resolves to what it names (see `names.py`).
        package = source.package
        parts.extend(part.encode("utf-8", "surrogateescape") for part in package)
        lines = Lines(data)
        for match in RELATIVE_IMPORT.finditer(data):
            if match.group(1).count(b".") - 1 >= len(package):
                text = lines.rest(match.end())
                if text is None:
                    return data
                parts.append(text)
    return b"\n".join(parts)


class Lines:
    """The logical lines of one file, read for a prefilter within a budget.

    A line is read from the start of the physical line holding the position asked about, and goes on while
    brackets stay open (outside comments), a line ends with a backslash, or the next line is indented
    deeper than the first without a block having begun: so it never ends before the statement does,
    though it may run past it (brackets inside strings are counted, and the indentation rule is what
    catches them). All the reads of one prefilter scan at most a few times the file's length; past that,
    and for a line longer than `LINES_AT_MOST` lines or `LINE_BYTES_AT_MOST` bytes, a read answers None
    and the caller admits the file.
    """

    __slots__ = ("_budget", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._budget = _READ_BUDGET_FILES * len(data) + _READ_BUDGET_EXTRA

    def start(self, position: int) -> int | None:
        """Where the physical line holding `position` starts; None when that is too far back to look."""
        newline = self.data.rfind(b"\n", max(0, position - LINE_BYTES_AT_MOST), position)
        if newline == -1 and position > LINE_BYTES_AT_MOST:
            return None
        return newline + 1

    def end(self, position: int) -> int | None:
        """Where the logical line holding `position` ends (its newline, or the end of the file)."""
        data = self.data
        start = self.start(position)
        if start is None:
            return None
        indent = _indentation(data, start)
        limit = min(start + LINE_BYTES_AT_MOST, start + self._budget)
        depth = 0
        line_start = start
        for _ in range(LINES_AT_MOST):
            newline = data.find(b"\n", line_start, limit)
            if newline == -1:
                if len(data) > limit:
                    break
                newline = len(data)
            line = data[line_start:newline]
            depth += _opened(line)
            if newline == len(data):
                self._budget -= newline - start
                return newline
            if depth <= 0 and not line.rstrip(b"\r").endswith(b"\\") and not _runs_on(data, line, newline, indent):
                self._budget -= newline - start
                return newline
            line_start = newline + 1
        self._budget = -1
        return None

    def rest(self, position: int) -> bytes | None:
        """The text from `position` to the end of its logical line."""
        end = self.end(position)
        return None if end is None else self.data[position:end]

    def statement(self, position: int) -> bytes | None:
        """The whole logical line holding `position`, from the start of its first physical line."""
        start, end = self.start(position), self.end(position)
        return None if start is None or end is None else self.data[start:end]


def _runs_on(data: bytes, line: bytes, newline: int, indent: int) -> bool:
    """Whether a line that seems complete may still go on: the next line is indented deeper, which only a
    continuation (or a block after a header ending in `:`) is."""
    if _indentation(data, newline + 1) <= indent:
        return False
    code = line.split(b"#", 1)[0].rstrip()
    return not code.endswith(b":")


def _opened(line: bytes) -> int:
    """How many brackets the line leaves open, not counting those in its comments (a bare carriage return
    ends a line, and a comment, for Python too)."""
    return sum(_opened_in(part) for part in line.split(b"\r"))


def _opened_in(line: bytes) -> int:
    # A `#` with an even number of each quote before it starts a comment (inside a string spanning lines
    # that can be wrong, and the indentation rule is then what keeps the line going).
    comment = line.find(b"#")
    while comment != -1 and (line.count(b"'", 0, comment) % 2 or line.count(b'"', 0, comment) % 2):
        comment = line.find(b"#", comment + 1)
    code = line if comment == -1 else line[:comment]
    return sum(code.count(opener) for opener in b"([{") - sum(code.count(closer) for closer in b")]}")


def _indentation(data: bytes, start: int) -> int:
    """How far the line starting at `start` is indented; a blank line counts as deeper than any."""
    position = start
    while position < len(data) and data[position] in b" \t\x0c":
        position += 1
    if position >= len(data) or data[position] in b"\r\n":
        return 1 << 30
    return position - start


def starts_word(data: bytes, position: int, *, after_dot: bool = False) -> bool:
    """Whether a word found at `position` starts there, not inside a longer name (nor after a dot, unless
    `after_dot`: an attribute's name).

    Patterns start with their literal word and leave this test to the caller: a look-behind at the start
    of a pattern stops the regex engine from skipping ahead to the literal."""
    return position == 0 or data[position - 1] not in (_IDENTIFIER_BYTES if after_dot else _NAME_BYTES)


def ends_word(data: bytes, end: int) -> bool:
    """Whether a word ending at `end` ends there, not inside a longer name."""
    return end == len(data) or data[end] not in _IDENTIFIER_BYTES


def name_before(data: bytes, position: int) -> bytes:
    """The name that ends where only spaces, newlines and continuations are left before `position` (`atomic`
    of `atomic\n    as tx` in parentheses); empty when there is none."""
    end = position
    while end > 0 and data[end - 1] in _SPACES:
        end -= 1
    start = end
    while start > 0 and data[start - 1] in _IDENTIFIER_BYTES:
        start -= 1
    return data[start:end]


_SPACES = frozenset(b" \t\f\r\n\\")
