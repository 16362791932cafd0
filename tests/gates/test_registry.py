"""The registries hold together: every rule module registers what it defines, every code in the one code
table (`CODES`) is shown failing somewhere (a fixture or an INVALID example) and has its docs section."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from pathlib import Path
from typing import ClassVar

import corral.gates.rules
import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.findings import code_family
from corral.gates.rules import CODES, FACT_KINDS, FAMILIES, PROJECT_CHECKS, RULES
from corral.gates.rules.base import EngineCodes, ProjectCheck, Rule, code_table, fact_to_json
from expectations import FIXTURES, example_source, read_expectations

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "rules"
# The package's contracts and registries; every other module under gates/rules/ is a rule module.
NOT_RULE_MODULES = {"base"}
RULE_MODULES = sorted(
    module.name for module in pkgutil.iter_modules(corral.gates.rules.__path__) if module.name not in NOT_RULE_MODULES
)


def _defined_in(module_name: str, base: type) -> list[type]:
    module = importlib.import_module(f"corral.gates.rules.{module_name}")
    return [
        value
        for _, value in inspect.getmembers(module, inspect.isclass)
        if issubclass(value, base) and value is not base and value.__module__ == module.__name__
    ]


@pytest.mark.parametrize("module_name", RULE_MODULES)
def test_every_rule_module_defines_a_registered_rule(module_name: str) -> None:
    """A rule module defines a per-file rule, or is the project half of one (job_report), and registers
    everything it defines: a rule left out of RULES would never run."""
    rules = _defined_in(module_name, Rule)
    checks = _defined_in(module_name, ProjectCheck)
    assert rules or checks, f"gates/rules/{module_name}.py defines no Rule and no ProjectCheck"
    for rule in rules:
        assert rule in RULES, f"{rule.__name__} is not registered in RULES"
    for check in checks:
        assert check in PROJECT_CHECKS, f"{check.__name__} is not registered in PROJECT_CHECKS"


def test_project_checks_belong_to_registered_rules() -> None:
    for check in PROJECT_CHECKS:
        assert check.rule in RULES, f"{check.__name__} reads the facts of an unregistered rule"
        assert FACT_KINDS[check.fact.fact_kind()] is check.fact
    assert len(FACT_KINDS) == len(PROJECT_CHECKS), "two project checks read facts of one kind"


def test_facts_survive_the_cache_round_trip() -> None:
    """Every kind of fact, as the rules record it on their examples, comes back equal from its JSON form."""
    seen = set()
    for check in PROJECT_CHECKS:
        for example in (*check.rule.VALID, *check.rule.INVALID):
            source = example_source(example).encode()
            facts = check_source("app/module.py", source, Config(root=Path("/project"))).facts or {}
            for kind, recorded in facts.items():
                for fact in recorded:
                    assert FACT_KINDS[kind].from_json(json.loads(json.dumps(fact_to_json(fact)))) == fact
                    seen.add(kind)
    assert seen == set(FACT_KINDS)


def test_every_rule_reports_codes_of_one_family() -> None:
    for rule in RULES:
        assert rule.codes, rule.__name__
        assert {code_family(code) for code in rule.codes} == {rule.family()}, rule.__name__
    assert {code_family(code) for code in EngineCodes.codes} == {"CRL0"}
    assert sorted(FAMILIES) == sorted({code_family(code) for code in CODES})
    assert [code for codes in FAMILIES.values() for code in codes] == sorted(CODES, key=code_family)


def test_the_table_is_every_declaration() -> None:
    declared = {code for declaration in (EngineCodes, *RULES) for code in declaration.codes}
    assert set(CODES) == declared


def test_a_shared_code_has_one_summary() -> None:
    class First(Rule):
        codes: ClassVar[dict[str, str]] = {"CRL998": "one summary"}

    class Second(Rule):
        codes: ClassVar[dict[str, str]] = {"CRL998": "another summary"}

    with pytest.raises(ValueError, match=r"CRL998 is declared by First .* and by Second"):
        code_table([First, Second])
    assert code_table([First, First]) == {"CRL998": "one summary"}


def _expected_codes() -> dict[str, list[str]]:
    """Every code some fixture or INVALID example expects, with where."""
    where: dict[str, list[str]] = {}
    sources = [
        (str(path.relative_to(REPO)), path.read_text("utf-8", "replace")) for path in sorted(FIXTURES.rglob("*.py"))
    ]
    sources += [
        (f"{declaration.__name__}.INVALID[{index}]", example_source(example))
        for declaration in (EngineCodes, *RULES)
        for index, example in enumerate(declaration.INVALID)
    ]
    for name, source in sources:
        expectations = read_expectations(source)
        for variant in expectations.variants:
            for expected in expectations.findings(variant):
                where.setdefault(expected.code, []).append(name)
    return where


def test_every_code_is_shown_failing() -> None:
    """A code no fixture and no INVALID example expects (`# error: COL CODE "..."`) is a code nothing proves."""
    expected = _expected_codes()
    missing = [code for code in CODES if code not in expected]
    assert not missing, f"no fixture or INVALID example expects {', '.join(missing)}"
    unknown = sorted(set(expected) - set(CODES))
    assert not unknown, f"expected codes that are not in CODES: {unknown} ({[expected[code] for code in unknown]})"


def test_every_code_has_its_docs_section() -> None:
    pages = {page.stem.upper(): page for page in DOCS.glob("*.md")}
    for name, codes in FAMILIES.items():
        page = pages.get(name)
        assert page is not None, f"no docs/rules/{name}.md for the codes {', '.join(codes)}"
        text = page.read_text("utf-8")
        for code in codes:
            assert code in text, f"{page.relative_to(REPO)} has no section for {code}"
