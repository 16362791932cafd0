"""Every rule's VALID and INVALID examples, run as test cases (Fixit style)."""

from __future__ import annotations

import pytest
from corral.gates.engine.run import check_files
from corral.gates.rules import CODES, RULES
from expectations import example_source, mismatches, read_expectations

CASES = [
    pytest.param(rule, kind, example, id=f"{rule.__name__}-{kind}-{index}")
    for rule in RULES
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for index, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "kind", "example"), CASES)
def test_example(rule: type, kind: str, example: str) -> None:
    source = example_source(example)
    expectations = read_expectations(source)
    for variant in expectations.variants:
        findings = check_files([("app/module.py", source.encode())], expectations.config(variant))
        own = [finding for finding in findings if finding.code in rule.codes]
        assert mismatches(own, expectations.findings(variant)) == [], variant
    if kind == "invalid":
        assert expectations, "an INVALID example must mark at least one line"
    else:
        assert not expectations, "a VALID example marks no line"


def test_every_rule_documents_its_codes() -> None:
    for rule in RULES:
        assert rule.VALID and rule.INVALID, rule.__name__
        for code, summary in rule.codes.items():
            assert CODES[code] == summary
