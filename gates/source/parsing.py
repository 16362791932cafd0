"""Reading a file's bytes and turning them into an `ast.Module`, or into the reason it cannot be checked
(CRL001).

Reading is bounded: only a regular file is opened (a FIFO would block, a device could be endless), without
blocking, and no more than the size limit is ever read.

The running interpreter's `ast` comes first; when it rejects a file, libcst (which reads every Python
version's grammar) lowers newer syntax into something it accepts, so a 3.14 file checked on 3.10 is still
checked. Only code neither accepts is uncheckable.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ast

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


_UNIVERSAL_LIMITS = ("too many nested parentheses", "too many levels of indentation", "too many statically nested")


class Uncheckable(Exception):
    """A file the gate cannot read as Python; `line`/`col` point at the cause where known."""

    def __init__(self, reason: str, line: int = 1, col: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.col = col


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_CHUNK = 1 << 20
# The line breaks Python's tokenizer counts (a lone carriage return is one); not str.splitlines's.
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")


def unreadable_kind(mode: int, size: int, max_bytes: int) -> Uncheckable | None:
    """Why a file of this `os.stat` mode and size is not read, if it is not."""
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        return Uncheckable(f"is not a regular file ({kind})")
    if size > max_bytes:
        return Uncheckable(f"is too large to check ({size} bytes, over max-file-size = {max_bytes})")
    return None


def read_source(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path` (links followed), at most `max_bytes` of them: Uncheckable
    for anything else, OSError when it cannot be opened or read."""
    refused = unreadable_kind(*_mode_and_size(os.stat(path)), max_bytes)
    if refused is not None:
        raise refused  # never opened: opening a FIFO waits for a writer, a device may act on it
    # Non-blocking and checked again on the open file: what was stat-ed may have been replaced since.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        refused = unreadable_kind(*_mode_and_size(os.fstat(descriptor)), max_bytes)
        if refused is not None:
            raise refused
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(descriptor, min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    if size > max_bytes:  # it grew while being read
        raise too_large(max_bytes)
    return b"".join(chunks)


def too_large(max_bytes: int) -> Uncheckable:
    """Content found to be over `max_bytes` while read (so its full size is not known)."""
    return Uncheckable(f"is too large to check (over max-file-size = {max_bytes} bytes)")


def _mode_and_size(status: os.stat_result) -> tuple[int, int]:
    return status.st_mode, status.st_size


def _first_two_lines(data: bytes) -> bytes:
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first != -1 else -1
    return data if second == -1 else data[:second]


def source_lines(text: str) -> list[str]:
    """A file's lines as `ast` numbers them: `source_lines(text)[lineno - 1]`."""
    return _LINE_BREAKS.split(text)


def declares_encoding(data: bytes) -> bool:
    """Whether `decode` may read the file in an encoding its coding declaration names."""
    return b"coding" in _first_two_lines(data)


def decode(data: bytes) -> str:
    """The text of a Python file: UTF-8 unless a coding cookie in its first two lines says otherwise."""
    if b"\0" in data:
        raise Uncheckable("contains NUL bytes")
    encoding = "utf-8-sig"
    cookie = _CODING.search(_first_two_lines(data))
    if cookie is not None:
        encoding = cookie.group(1).decode("ascii")
    try:
        return data.decode(encoding)
    except LookupError:
        raise Uncheckable(f"unknown encoding {encoding!r} in its coding declaration") from None
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        name = codecs.lookup(encoding).name
        shown = "utf-8" if name == "utf-8-sig" else name  # the default reads a BOM if there is one: not a claim
        raise Uncheckable(f"is not valid {shown}: {error.reason}", line) from None


def parse(text: str, filename: str) -> ast.Module:
    """Parse a file's text, lowering newer syntax when needed; raise Uncheckable with the reason otherwise."""
    import ast

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not the gate's concern
            return ast.parse(text, filename)
    except SyntaxError as error:
        # Limits every Python version's tokenizer shares: no newer grammar accepts such a file, and
        # handing it to libcst's native parser could exhaust its stack.
        if any(limit in error.msg for limit in _UNIVERSAL_LIMITS):
            raise Uncheckable(f"has invalid syntax: {error.msg}", error.lineno or 1, error.offset or 1) from None
        first_error = error
    except (RecursionError, MemoryError):
        raise Uncheckable("is nested too deeply for Python's parser") from None
    except ValueError as error:
        raise Uncheckable(str(error)) from None
    from corral.gates.source.type_parameters import lower_type_parameters

    # The common case, PEP 695 type parameters on Python 3.10/3.11, needs no libcst.
    lowered = lower_type_parameters(text)
    if lowered is not None:
        return lowered
    from corral.gates.source.lowering import parse_lowered

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return parse_lowered(text, filename)
    except SyntaxError:
        raise Uncheckable(
            f"has invalid syntax: {first_error.msg}", first_error.lineno or 1, first_error.offset or 1
        ) from None
    except (RecursionError, MemoryError):
        raise Uncheckable("is nested too deeply for Python's parser") from None
