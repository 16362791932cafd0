"""`FileContext`: what every rule (and the analyses a rule runs) may know about the file it checks."""

from __future__ import annotations

import ast

from corral.gates.analysis.names import ModuleNames
from corral.gates.config import Config
from corral.gates.findings import Finding


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

    def finding(self, node: ast.AST, code: str, message: str) -> Finding:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + 1
        return Finding(self.relpath, line, col, code, message)

    def add_fact(self, kind: str, fact: object) -> None:
        """Record what a whole-project check needs from this file (kept in the cache with the findings)."""
        self.facts.setdefault(kind, []).append(fact)
