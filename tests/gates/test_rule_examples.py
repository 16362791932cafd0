"""Every rule's VALID and INVALID examples (and the engine's, for its own codes), run as test cases (Fixit style)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from corral.gates.config import Config, ConfigError, config_from_table
from corral.gates.engine.run import check_files, unusable_config
from corral.gates.findings import Finding
from corral.gates.rules import CODES, RULES
from corral.gates.rules.base import EngineCodes
from expectations import example_source, expected_findings

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path("/project")
RELPATH = "app/module.py"
# An example's leading lines that give the settings it is checked with: `# [tool.corral] key = value`.
SETTINGS = "# [tool.corral] "

DECLARATIONS = (EngineCodes, *RULES)
CASES = [
    pytest.param(declaration, kind, example, id=f"{declaration.__name__}-{kind}-{index}")
    for declaration in DECLARATIONS
    for kind, examples in (("valid", declaration.VALID), ("invalid", declaration.INVALID))
    for index, example in enumerate(examples)
]


def example_config(source: str) -> Config:
    lines = [line.removeprefix(SETTINGS) for line in source.splitlines() if line.startswith(SETTINGS)]
    return config_from_table(tomllib.loads("\n".join(lines)), root=ROOT, source=None)


def example_findings(source: str) -> list[Finding]:
    """The findings on the example, as a front checking it alone reports them (settings it cannot use are
    the flake8 front's CRL000)."""
    try:
        config = example_config(source)
    except ConfigError as error:
        return [unusable_config(RELPATH, error)]
    return check_files([(RELPATH, source.encode())], config)


@pytest.mark.parametrize(("declaration", "kind", "example"), CASES)
def test_example(declaration: type, kind: str, example: str) -> None:
    source = example_source(example)
    own_codes = set(declaration.codes)
    found = {(finding.line, finding.code) for finding in example_findings(source) if finding.code in own_codes}
    expected = expected_findings(source)
    assert found == expected
    if kind == "invalid":
        assert expected, "an INVALID example must mark at least one line"


def test_every_rule_documents_its_codes() -> None:
    for declaration in DECLARATIONS:
        assert declaration.VALID and declaration.INVALID, declaration.__name__
        for code, summary in declaration.codes.items():
            assert CODES[code] == summary
