"""The CRL2 frameworks: every framework module is listed, has a fixture, and its prove and fix data work."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import corral.gates.frameworks as package
import pytest
from corral.gates.cli.fix import KEYWORDS, fix_source
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.frameworks import BY_NAME, FRAMEWORKS
from corral.gates.frameworks.base import Framework
from corral.gates.rules.job_timeouts import JobTimeouts
from expectations import FIXTURES, example_source

CONFIG = Config(root=Path("/project"))
# The modules of the package that are no framework: the contract and the walk.
SHARED = {"base", "walk"}
FRAMEWORK_MODULES = sorted(info.name for info in pkgutil.iter_modules(package.__path__) if info.name not in SHARED)


def test_every_framework_module_is_listed_once() -> None:
    listed = []
    for name in FRAMEWORK_MODULES:
        framework = importlib.import_module(f"{package.__name__}.{name}").FRAMEWORK
        assert isinstance(framework, Framework), name
        assert framework in FRAMEWORKS, f"frameworks/{name}.py is not in FRAMEWORKS"
        listed.append(framework)
    assert sorted(map(id, listed)) == sorted(map(id, FRAMEWORKS)), "FRAMEWORKS lists an object of no module"
    assert len(BY_NAME) == len(FRAMEWORKS), "two frameworks share a name"


def _declared_frameworks(fixture: Path) -> set[str]:
    facts = check_source(f"app/{fixture.name}", fixture.read_bytes(), CONFIG).facts
    return {str(fact.framework) for fact in facts.get("jobs", ())}


def test_every_framework_has_a_fixture_declaring_its_kinds() -> None:
    declared: set[str] = set()
    for fixture in sorted((FIXTURES / "crl2").glob("*.py")):
        declared |= _declared_frameworks(fixture)
    missing = sorted(set(BY_NAME) - declared)
    assert not missing, f"no fixture under tests/fixtures/crl2 declares a job kind of {missing}"


@pytest.mark.parametrize("framework", FRAMEWORKS, ids=lambda framework: framework.name)
def test_the_prefilter_admits_the_framework_examples(framework: Framework) -> None:
    from corral.gates.source.prefilter import Source

    for example in (*framework.VALID, *framework.INVALID):
        assert JobTimeouts.might_match(Source(example_source(example).encode()), CONFIG)


@pytest.mark.parametrize("framework", FRAMEWORKS, ids=lambda framework: framework.name)
def test_the_prefilter_words_cover_what_the_framework_claims(framework: Framework) -> None:
    words = framework.words
    for name in framework.decorators:
        assert name.split(".")[0].encode() in words.packages, name
        assert any(word in name.rpartition(".")[2].encode() for word in words.declaring), name
    for method in words.methods:
        assert any(word in method.encode() for word in words.declaring), method
    # Calls, dict literals and classes can be spelled in any words: a file importing the framework is read.
    hooks = ("called", "mapping", "class_body")
    if framework.calls or any(getattr(type(framework), hook) is not getattr(Framework, hook) for hook in hooks):
        assert words.always_read


def test_one_summary_per_code_and_fix_keywords_name_their_own_code() -> None:
    summaries: dict[str, set[str]] = {}
    for framework in FRAMEWORKS:
        summaries.setdefault(framework.code, set()).add(framework.summary)
    assert all(len(found) == 1 for found in summaries.values()), summaries
    for code, keyword in KEYWORDS.items():
        sharing = [framework for framework in FRAMEWORKS if framework.code == code]
        # fix finds what to rewrite by the finding's code: it must not reach another framework's declarations.
        assert [framework.fix_keyword for framework in sharing] == [keyword], code


def test_default_limits_are_positive() -> None:
    for framework in FRAMEWORKS:
        assert framework.default_limit is None or framework.default_limit > 0, framework.name


def _planted(framework: Framework) -> tuple[str, int]:
    """A framework example with, appended, what `corral prove` plants: its decorator with the limit off."""
    assert framework.no_limit_arguments is not None
    lines = example_source((*framework.VALID, *framework.INVALID)[0]).splitlines()
    declaration = next(match for line in lines if (match := re.match(r"@([A-Za-z_][\w.]*)", line)))
    lines += ["", f"@{declaration.group(1)}{framework.no_limit_arguments}", "def planted(): ..."]
    return "\n".join(lines) + "\n", len(lines) - 1


@pytest.mark.parametrize(
    "framework", [each for each in FRAMEWORKS if each.no_limit_arguments is not None], ids=lambda each: each.name
)
def test_what_prove_plants_fails_with_the_framework_code_and_fix_mends_it(framework: Framework) -> None:
    source, line = _planted(framework)
    found = {
        (finding.line, finding.col, finding.code)
        for finding in check_source("app/a.py", source.encode(), CONFIG).findings
    }
    (col,) = [col for at, col, code in found if at == line and code == framework.code]
    if framework.fix_keyword is None:
        return
    fixed = fix_source(source, {(line, col): framework.fix_keyword}, 30)
    assert {finding.line for finding in check_source("app/a.py", fixed.encode(), CONFIG).findings} <= {
        at for at, _, _ in found if at != line
    }


GATES = Path(package.__file__).resolve().parents[1]


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """The string and bytes constants of a module that are no docstring, with their lines."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docstrings:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            found.append((node.lineno, text))
    return found


def test_a_framework_api_string_lives_in_its_own_module_only() -> None:
    # corral's own names are also the CRL3 rule's (pinned to the runtime by test_runtime_api_pins.py).
    others = [framework.name for framework in FRAMEWORKS if framework.name != "corral"]
    pattern = re.compile(rf"\b({'|'.join(map(re.escape, others))})\b", re.IGNORECASE)
    misplaced = []
    for path in sorted(GATES.rglob("*.py")):
        relpath = path.relative_to(GATES).as_posix()
        for line, text in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            for match in pattern.finditer(text):
                if relpath != f"frameworks/{match.group(1).lower()}.py":
                    misplaced.append(f"{relpath}:{line}: {match.group(1)}")
    assert not misplaced
