"""`analysis.nodes`: the walks the call following reads bodies with give `ast.walk`'s nodes in its order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from corral.gates.analysis.nodes import STATEMENT_HOLDERS, children, walk, walk_statements
from expectations import FIXTURES

REPOSITORY = Path(__file__).resolve().parents[2]
# Every statement that holds others (try/except*, match, async, nested classes and functions) and expressions
# that hold no statement at all.
SAMPLE = """
async def outer(self, items):
    try:
        self.a = [x async for x in items]
    except* ValueError as error:
        self.b: int = 1
    else:
        (self.c, [self.d, *self.e]) = pair()
    finally:
        lambda: (yield)
    match items:
        case [first, *rest] if first:
            self.f = first
        case {"k": value, **others}:
            class Inner:
                g = value
    async with lock() as held, other():
        while held:
            def nested():
                self.h = 2
"""


def sources() -> list[str]:
    files = sorted(REPOSITORY.glob("gates/**/*.py")) + sorted(FIXTURES.glob("crl4_projects/**/*.py"))
    return [SAMPLE, *(path.read_text(encoding="utf-8") for path in files)]


@pytest.mark.parametrize("source", sources(), ids=lambda source: str(len(source)))
def test_walk_gives_ast_walks_nodes_in_its_order(source: str) -> None:
    tree = ast.parse(source)
    assert list(walk(tree)) == list(ast.walk(tree))
    for node in ast.walk(tree):
        assert children(node) == list(ast.iter_child_nodes(node))


@pytest.mark.parametrize("source", sources(), ids=lambda source: str(len(source)))
def test_walk_statements_gives_the_statement_holders_of_ast_walk_in_its_order(source: str) -> None:
    tree = ast.parse(source)
    expected = [node for node in ast.walk(tree) if node is tree or isinstance(node, STATEMENT_HOLDERS)]
    assert list(walk_statements(tree)) == expected


def test_walk_statements_reads_no_expression() -> None:
    tree = ast.parse(SAMPLE)
    assert not any(isinstance(node, ast.expr) for node in walk_statements(tree))
    assert sum(isinstance(node, ast.Assign) for node in walk_statements(tree)) == 5
