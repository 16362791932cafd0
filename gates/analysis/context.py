"""`FileContext`: what every rule (and the analyses a rule runs) may know about the file it checks."""

from __future__ import annotations

import ast

from corral.gates.analysis.names import ModuleNames
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.source.parsing import source_lines


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
        self._lines: list[str] | None = None

    def column(self, line: int, utf8_offset: int) -> int:
        """The 1-based column in characters of `ast`'s 0-based UTF-8 byte offset on `line`: what ruff,
        pycodestyle and GitHub count, so a finding on a line with non-ASCII text points where they do."""
        if self._lines is None:
            self._lines = source_lines(self.text)
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        if text.isascii():
            return utf8_offset + 1
        return len(text.encode("utf-8", "surrogatepass")[:utf8_offset].decode("utf-8", "replace")) + 1

    def finding(self, node: ast.AST, code: str, message: str) -> Finding:
        line = getattr(node, "lineno", 1)
        col = self.column(line, getattr(node, "col_offset", 0))
        end_line = getattr(node, "end_lineno", None)
        end_offset = getattr(node, "end_col_offset", None)
        if end_line is None or end_offset is None:
            return Finding(self.relpath, line, col, code, message)
        return Finding(self.relpath, line, col, code, message, end_line, self.column(end_line, end_offset))

    def add_fact(self, kind: str, fact: object) -> None:
        """Record what a whole-project check needs from this file (kept in the cache with the findings)."""
        self.facts.setdefault(kind, []).append(fact)
