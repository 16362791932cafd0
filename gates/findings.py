"""The finding: one thing wrong at one place, the unit every output and front reports; and the facts
per file that whole-project checks read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

# What whole-project checks read: per file (relative path), the facts its rules recorded, by kind.
FactsByFile = Mapping[str, Mapping[str, list[Any]]]


class Finding(NamedTuple):
    """A rule's verdict on one place. `path` is relative to the project root and `/`-separated;
    `line` and `col` are 1-based, `col` counted in characters (as ruff and GitHub count). `end_line` and
    `end_col` are where the offending code ends (`end_col` is the column just after it), 0 when the
    finding marks a point rather than a span of code."""

    path: str
    line: int
    col: int
    code: str
    message: str
    end_line: int = 0
    end_col: int = 0

    def as_dict(self) -> dict[str, str | int]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "message": self.message,
            "end_line": self.end_line,
            "end_col": self.end_col,
        }


def code_family(code: str) -> str:
    """A code's rule family: CRL101 is in CRL1; the engine's own codes make up CRL0."""
    return code[:4]
