"""`analysis.nodes`: the walks the call following reads bodies with give `ast.walk`'s nodes in its order; and
`scoped.lines_mentioning` finds the lines its whole-word pattern does."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from corral.gates.analysis.nodes import STATEMENT_HOLDERS, children, walk, walk_statements
from corral.gates.analysis.scoped import lines_mentioning
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
if sys.version_info < (3, 11):  # `except*` (a TryStar node) is parsed from Python 3.11 on
    SAMPLE = SAMPLE.replace("except*", "except")


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


WORDS = ("atomic", "Thread", "db.begin", "_spawn", "é")
TEXTS = [
    "atomic\nnonatomic atomic_x x_atomic\n  with transaction.atomic():\n",
    "Threads Thread(target=f)\nthreading.Thread\n\n\nxThread Thread\n",
    "db.begin() adb.begin db.beginning (db.begin)\n",
    "_spawn(); __spawn _spawn_ é éé aé é1 1é\r\né\n",
    "atomicatomic atomic",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_lines_mentioning_gives_the_lines_of_the_whole_word_pattern(text: str) -> None:
    """Found without the pattern's leading word boundary (so `re` skips ahead), checked where each match starts."""
    for count in range(1, len(WORDS) + 1):
        words = WORDS[:count]
        pattern = re.compile(r"\b(?:" + "|".join(sorted(re.escape(word) for word in words)) + r")\b")
        expected = sorted({text.count("\n", 0, match.start()) + 1 for match in pattern.finditer(text)})
        assert lines_mentioning(text, words) == expected
