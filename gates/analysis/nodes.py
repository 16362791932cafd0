"""Walking `ast` trees without `ast.walk`'s two generators per node: the call following reads every node of
the bodies it reaches (what a module's calls are driven by, whether a function yields, what methods assign to
their instance), and `ast.iter_child_nodes` was most of that time."""

from __future__ import annotations

import ast
from collections.abc import Iterator

# The nodes a statement can stand under: statements, `except` handlers and `match` cases (no expression holds one).
STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def children(node: ast.AST) -> list[ast.AST]:
    """The nodes directly under `node`, in `ast.iter_child_nodes`'s order (the order of its fields)."""
    found: list[ast.AST] = []
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST))
    return found


def walk(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under `root` (itself included) in `ast.walk`'s order: breadth first."""
    pending = [root]
    for node in pending:  # appended to while it is read: each level after the one before
        pending.extend(children(node))
        yield node


def walk_statements(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `walk(root)` that can hold a statement (`STATEMENT_HOLDERS`, and `root`), in the same order:
    expressions hold none, so they are not read."""
    pending = [root]
    for node in pending:
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                pending.extend(item for item in value if isinstance(item, STATEMENT_HOLDERS))
        yield node
