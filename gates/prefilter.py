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
# A logical line longer than this many physical lines is not read to its end (callers then admit the file).
LINES_AT_MOST = 50


class Source:
    """One file's bytes as the prefilters read them, and the answers they share.

    Several rules ask the same questions of a file (does it name `asyncio`? can a call in it reach the
    network?): each substring test and each whole-file predicate runs once per file, whichever rule asks
    first. `relpath` is the file's path relative to the project root: what a relative import reaches
    depends on it.
    """

    __slots__ = ("_answers", "data", "relpath")

    def __init__(self, data: bytes, relpath: str = "") -> None:
        self.data = data
        self.relpath = relpath
        self._answers: dict[object, bool] = {}

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

    def holds(self, predicate: Callable[[Source], bool]) -> bool:
        """`predicate(self)`, asked once per file whichever rule asks first."""
        answer = self._answers.get(predicate)
        if answer is None:
            answer = self._answers[predicate] = predicate(self)
        return answer


def logical_line_end(data: bytes, start: int) -> int:
    """Where the logical line holding `start` ends (a newline outside brackets, not continued), or -1 when
    it runs on for more than `LINES_AT_MOST` lines. Brackets inside strings are counted too."""
    depth = 0
    position = start
    for _ in range(LINES_AT_MOST):
        newline = data.find(b"\n", position)
        if newline == -1:
            return len(data)
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
