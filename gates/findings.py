"""The finding: one thing wrong at one place, the unit every output and front reports."""

from __future__ import annotations

from typing import NamedTuple


class Finding(NamedTuple):
    """A rule's verdict on one place. `path` is relative to the project root and `/`-separated;
    `line` and `col` are 1-based."""

    path: str
    line: int
    col: int
    code: str
    message: str

    def as_dict(self) -> dict[str, str | int]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "message": self.message,
        }
