"""Every rule's VALID and INVALID examples, and the engine's own, run as test cases (Fixit style).

An example is read like a fixture (`expectations.py`): `# error: COL CODE "fragment"` on the lines it
reports, and `# corral-config: ...` header lines for the settings it is checked with.
"""

from __future__ import annotations

import pytest
from corral.gates.config import ConfigError
from corral.gates.engine.run import check_sources, unusable_config
from corral.gates.findings import Finding
from corral.gates.rules import CODES, RULES
from corral.gates.rules.base import EngineCodes
from expectations import Expectations, assert_matches, example_source, read_expectations

RELPATH = "app/module.py"
DECLARATIONS = (EngineCodes, *RULES)

CASES = [
    pytest.param(declaration, kind, example, id=f"{declaration.__name__}-{kind}-{index}")
    for declaration in DECLARATIONS
    for kind, examples in (("valid", declaration.VALID), ("invalid", declaration.INVALID))
    for index, example in enumerate(examples)
]


def example_findings(source: str, expectations: Expectations, variant: str | None) -> list[Finding]:
    """The findings on the example, as a front checking it alone reports them (settings it cannot use are
    the flake8 front's CRL000)."""
    try:
        config = expectations.config(variant)
    except ConfigError as error:
        return [unusable_config(RELPATH, error)]
    return check_sources([(RELPATH, source.encode())], config).findings


@pytest.mark.parametrize(("declaration", "kind", "example"), CASES)
def test_example(declaration: type, kind: str, example: str) -> None:
    source = example_source(example)
    expectations = read_expectations(source)
    own_codes = set(declaration.codes)
    for variant in expectations.variants:
        own = [finding for finding in example_findings(source, expectations, variant) if finding.code in own_codes]
        assert_matches(own, expectations.findings(variant), variant)
    if kind == "invalid":
        assert expectations, "an INVALID example must mark at least one line"
    else:
        assert not expectations, "a VALID example marks no line"


def test_every_rule_documents_its_codes() -> None:
    for declaration in DECLARATIONS:
        assert declaration.VALID and declaration.INVALID, declaration.__name__
        for code, summary in declaration.codes.items():
            assert CODES[code] == summary
