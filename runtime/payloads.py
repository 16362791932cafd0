"""What every store can hold: the JSON of arguments, payloads and results, and storable error text.

Owns the limits a stored value is held to on every store alike, so SQLite and the memory store
refuse what PostgreSQL would: JSON only (no NaN, no cycles), at most :data:`MAX_JSON_DEPTH` levels
of nesting (Python's own ``json`` cannot read much deeper back), at most :data:`MAX_JSON_BYTES`,
and no character PostgreSQL's ``jsonb`` refuses (NUL, a lone surrogate). Error texts and tracebacks
are never refused (a failure must not be lost): what ``text`` cannot hold is escaped instead, and an
overlong text is cut with a note.

The checks cost almost nothing for ordinary values: the text ``json.dumps`` makes is ASCII, so a
NUL or a surrogate can only appear as a ``\\u0000`` / ``\\udXXX`` escape, and the nesting cannot
exceed the count of brackets; only a value that trips one of these substring tests is walked.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_TRACEBACK_CHARS",
    "UnstorableJson",
    "encode_json",
    "is_storable_text",
    "storable_text",
]

MAX_JSON_DEPTH = 100
MAX_JSON_BYTES = 8 * 1024 * 1024
MAX_ERROR_CHARS = 10_000
MAX_TRACEBACK_CHARS = 100_000


class UnstorableJson(ValueError):
    """A value no store may hold as JSON. The message is a predicate ("is not JSON (...)", "holds a
    NUL character ..."): the caller puts whose value it is in front."""


# One encoder for every value: `json.dumps` with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode_json(value: Any) -> str:
    """``value`` as compact JSON every store accepts; :class:`UnstorableJson` says why not."""
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        raise UnstorableJson(f"is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except (TypeError, ValueError) as exc:
        raise UnstorableJson(f"is not JSON ({type(value).__name__}: {exc})") from None
    if len(text) > MAX_JSON_BYTES:  # ASCII: characters are bytes
        raise UnstorableJson(f"is {len(text)} bytes of JSON, more than the limit of {MAX_JSON_BYTES}")
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise UnstorableJson(f"is nested more than {MAX_JSON_DEPTH} levels deep")
    if "\\u0000" in text or "\\ud" in text:
        _refuse_characters(value)
    return text


def _depth(value: Any) -> int:
    """How many arrays and objects deep ``value`` is (walked without recursion)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        pending.extend((child, level) for child in children)
    return deepest


def _refuse_characters(value: Any) -> None:
    """Raise when a string (key or value) in ``value`` holds a NUL or a surrogate: ``jsonb`` refuses
    both, and a surrogate is not text in any encoding a store writes."""
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings = [item]
        elif isinstance(item, dict):
            strings = [key for key in item if isinstance(key, str)]
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
            continue
        else:
            continue
        for string in strings:
            if "\x00" in string:
                raise UnstorableJson(f"holds a NUL character (\\u0000) in the string {_preview(string)}")
            try:
                string.encode("utf-8")
            except UnicodeEncodeError:
                raise UnstorableJson(f"holds a lone surrogate in the string {_preview(string)}") from None


def _preview(string: str) -> str:
    return ascii(string if len(string) <= 40 else string[:40] + "...")


def is_storable_text(text: str) -> bool:
    """True when every store's text column holds ``text`` as it is (no NUL, no lone surrogate)."""
    return "\x00" not in text and storable_text(text, limit=len(text)) == text


def storable_text(text: str, *, limit: int) -> str:
    """``text`` as every store's text column holds it: NUL and lone surrogates escaped (``\\x00``,
    ``\\udc80``), cut to ``limit`` characters with a note saying how much was cut."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]}... [{cut} more characters cut]"
    return text
