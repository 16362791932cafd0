"""Lowering newer syntax for the running `ast`: every fixture keeps its calls and keyword values in place.

Each fixture in tests/fixtures/newsyntax marks what a Python 3.14 parse would find on each line:
`# call: a.b, c` names the calls (by dotted name) that start on that line, `# kw: timeout` a keyword
argument whose value starts there. The lowered tree must have exactly the marked calls on exactly those
lines, each at the column where its name is written in the original line.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "newsyntax"
CALL_MARK = re.compile(r"#\s*call:\s*([\w., ]+?)\s*(?=#|$)")
KEYWORD_MARK = re.compile(r"#\s*kw:\s*([\w, ]+?)\s*(?=#|$)")


def _load_lowering() -> ModuleType:
    try:
        from corral.gates.source import lowering
    except ImportError:  # corral is not installed in this interpreter (e.g. a bare venv of another version)
        path = Path(__file__).resolve().parents[2] / "gates" / "source" / "lowering.py"
        spec = importlib.util.spec_from_file_location("lowering_under_test", path)
        assert spec is not None and spec.loader is not None
        lowering = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lowering)
    return lowering


lowering = _load_lowering()
VALID = sorted(path for path in FIXTURES.glob("*.py") if "# expect: SyntaxError" not in path.read_text())
INVALID = sorted(path for path in FIXTURES.glob("*.py") if path not in VALID)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _marks(source: str, pattern: re.Pattern[str]) -> set[tuple[int, str]]:
    return {
        (number, name.strip())
        for number, line in enumerate(source.splitlines(), start=1)
        for match in pattern.finditer(line)
        for name in match[1].split(",")
    }


def _byte_columns(line: str, pattern: str) -> set[int]:
    """UTF-8 offsets (as `ast` counts columns) where `pattern` matches in `line`, or where its match ends."""
    return {len(line[: match.start(1)].encode()) for match in re.finditer(pattern, line)}


def _lowered_tree(path: Path) -> ast.Module:
    tree = lowering.parse_lowered(path.read_text(encoding="utf-8"), str(path))
    assert isinstance(tree, ast.Module)
    return tree


@pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
def test_calls_keep_their_lines_and_columns(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    calls = [
        (call.lineno, call.col_offset, name)
        for call in ast.walk(_lowered_tree(path))
        if isinstance(call, ast.Call) and (name := _dotted(call.func)) is not None
    ]
    assert {(line, name) for line, _, name in calls} == _marks(source, CALL_MARK)
    for line, column, name in calls:
        written_at = _byte_columns(lines[line - 1], rf"(?<![\w.])({re.escape(name)})\s*\(")
        assert column in written_at, f"{name} at {line}:{column}, written at {written_at}"


@pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
def test_keyword_values_keep_their_positions(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = {
        (keyword.value.lineno, keyword.arg, keyword.value.col_offset)
        for keyword in ast.walk(_lowered_tree(path))
        if isinstance(keyword, ast.keyword) and keyword.arg is not None
    }
    for line, name in _marks(source, KEYWORD_MARK):
        (column,) = _byte_columns(lines[line - 1], rf"\b{name}\s*=\s*()")
        assert (line, name, column) in found


@pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
def test_names_keep_their_positions(path: Path) -> None:
    """Every name in the lowered tree sits where the original text spells it."""
    source = path.read_text(encoding="utf-8")
    lines = [line.encode() for line in source.splitlines()]
    for name in ast.walk(_lowered_tree(path)):
        if isinstance(name, ast.Name):
            line = lines[name.lineno - 1]
            at = line[name.col_offset :]
            assert at.startswith(name.id.encode()), (name.id, name.lineno, line)


@pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
def test_lowering_keeps_every_line(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lowered = lowering.lower_source(source, str(path))
    assert len(lowered.splitlines()) == len(source.splitlines())


@pytest.mark.parametrize("path", INVALID, ids=lambda path: path.stem)
def test_invalid_file_raises_syntax_error_at_its_line(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    (error_line,) = [number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# error")]
    with pytest.raises(SyntaxError) as raised:
        lowering.parse_lowered(source, str(path))
    assert raised.value.filename == str(path)
    assert raised.value.lineno == error_line
    assert isinstance(raised.value.offset, int)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("try:\n    pass\nexcept A, B as error:\n    pass\n", id="pep758-with-as"),
        pytest.param('x = t"{a}" "plain"\n', id="t-string-with-str"),
        pytest.param('x = b"bytes" "str"\n', id="bytes-with-str"),
        pytest.param('x = f"{}"\n', id="empty-replacement-field"),
        pytest.param("type X = int\ndef f(:\n    pass\n", id="bad-parameters"),
        # Valid on 3.14 but beyond libcst 1.9, which must still end in SyntaxError: move these to the
        # fixtures when libcst reads them.
        pytest.param('x = t"{a}" t"{b}"\n', id="libcst-concatenated-t-strings"),
        pytest.param('x = tr"{a}"\n', id="libcst-tr-prefix"),
    ],
)
def test_code_no_grammar_accepts_raises_syntax_error(source: str) -> None:
    with pytest.raises(SyntaxError):
        lowering.parse_lowered(source, "example.py")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("type X = int\nx = " + "(" * 5000 + ")" * 5000 + "\n", id="brackets"),
        pytest.param("type X = int\nx = " + "1 + " * 100_000 + "1\n", id="operator-chain"),
        pytest.param("type X = int\nx = f" + "()" * 100_000 + "\n", id="call-chain"),
    ],
)
def test_deep_nesting_raises_recursion_error_instead_of_crashing(source: str) -> None:
    # libcst's native parser would overflow the machine stack on these and take the process down.
    with pytest.raises(RecursionError):
        lowering.parse_lowered(source, "deep.py")


def test_flat_data_is_not_mistaken_for_nesting() -> None:
    rows = "".join(f'    {{"key{i}": -{i}, "pair": (1, 2)}},\n' for i in range(3000))
    source = f"type Row = dict[str, int]\nrows = [\n{rows}]\n"
    tree = lowering.parse_lowered(source, "data.py")
    assert isinstance(tree.body[-1], ast.Assign)


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="the running ast reads PEP 758 itself")
def test_parenthesising_an_except_tuple_shifts_at_most_the_rest_of_its_line() -> None:
    source = "try:\n    pass\nexcept A, B: threading.Thread()\nthreading.Timer()\n"
    calls = sorted(
        (node.lineno, node.col_offset)
        for node in ast.walk(lowering.parse_lowered(source, "x.py"))
        if isinstance(node, ast.Call)
    )
    assert calls == [(3, 14), (4, 0)]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads PEP 701 f-strings itself")
def test_fstring_becomes_a_tuple_of_its_fields_in_place() -> None:
    source = 'x = f"a{b["k"]!r:>{width}}c{d=}"\n'
    assert lowering.lower_source(source, "x.py") == 'x = (   b["k"],    width,   d, )\n'


TYPE_PARAMETER_SOURCES = [
    "def first[T](items: list[T]) -> T:\n    return items[0]\n",
    "class Box[T: (int, str), *Ts, **P](Base, metaclass=Meta):\n    x: T\n",
    "async def f[T: dict[str, int] = dict, U = int,](x):\n    await g(x, timeout=5)\n",
    "def f[\n    T,  # a comment\n    U: 'int',\n](x): pass\n",
    "type Alias = dict[str, int]\ntype Pair[T] = tuple[T, T]\nclass C:\n    type Inner[T]=list[T]\n",
    "import type as t\nx = {'é': 1}\ndef é[T](é: T): return f'{é}'\r\n",
]
NOT_TYPE_PARAMETER_SOURCES = [
    "def f[](): pass\n",  # empty: invalid on every version
    "def f[T: ](): pass\n",
    "def f[T = 1 = 2](): pass\n",
    "def f[*Ts: int](): pass\n",
    "x = 1; type X = int\n",  # an alias where the scan does not look: left to libcst
    "def f[T](): return f'{'nested'}'\n",  # other newer syntax too
    "def f(): pass\n",  # nothing to lower
]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads type parameters itself")
@pytest.mark.parametrize("source", TYPE_PARAMETER_SOURCES)
def test_type_parameters_are_lowered_without_libcst_as_libcst_lowers_them(source: str) -> None:
    from corral.gates.source.type_parameters import lower_type_parameters

    fast = lower_type_parameters(source)
    assert fast is not None
    assert ast.dump(fast, include_attributes=True) == ast.dump(
        lowering.parse_lowered(source, "x.py"), include_attributes=True
    )


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads type parameters itself")
@pytest.mark.parametrize("source", NOT_TYPE_PARAMETER_SOURCES)
def test_other_shapes_are_left_to_libcst(source: str) -> None:
    from corral.gates.source.type_parameters import lower_type_parameters

    assert lower_type_parameters(source) is None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads type parameters itself")
def test_a_file_with_only_type_parameters_is_checked_without_loading_libcst(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "pyproject.toml").write_text("[tool.corral]\n")
    (tmp_path / "jobs.py").write_text("import threading\ndef start[T](x: T) -> None:\n    threading.Thread().start()\n")
    script = (
        "import sys; from corral.gates.cli.main import main; code = main(['check', '--no-cache']); "
        "print('libcst' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "jobs.py:3:5: CRL101" in completed.stdout
    assert completed.stderr.strip() == "False"
