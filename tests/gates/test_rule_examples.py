"""Every rule's VALID and INVALID examples, run as test cases (Fixit style)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_files
from corral.gates.rules import CODES, RULES
from expectations import example_source, expected_findings

CASES = [
    pytest.param(rule, kind, example, id=f"{rule.__name__}-{kind}-{index}")
    for rule in RULES
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for index, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "kind", "example"), CASES)
def test_example(rule: type, kind: str, example: str) -> None:
    source = example_source(example)
    findings = check_files([("app/module.py", source.encode())], Config(root=Path("/project")))
    own_codes = set(rule.codes)
    found = {(finding.line, finding.code) for finding in findings if finding.code in own_codes}
    expected = expected_findings(source)
    assert found == expected
    if kind == "invalid":
        assert expected, "an INVALID example must mark at least one line"


def test_every_rule_documents_its_codes() -> None:
    for rule in RULES:
        assert rule.VALID and rule.INVALID, rule.__name__
        for code, summary in rule.codes.items():
            assert CODES[code] == summary
