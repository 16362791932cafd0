"""End-to-end fixture files: the findings the engine reports are exactly the `# error:` comments, under each
configuration the fixture's header asks for."""

from __future__ import annotations

from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from expectations import assert_matches, read_expectations, rule_fixture_folders

FIXTURE_FILES = [file for folder in rule_fixture_folders() for file in sorted(folder.glob("*.py"))]
CRL1_FILES = [file for file in FIXTURE_FILES if file.parent.name == "crl1"]
RUNS = [
    pytest.param(file, variant, id=f"{file.parent.name}/{file.stem}" + (f"[{variant}]" if variant else ""))
    for file in FIXTURE_FILES
    for variant in read_expectations(file.read_text()).variants
]


@pytest.mark.parametrize(("fixture", "variant"), RUNS)
def test_fixture(fixture: Path, variant: str | None) -> None:
    source = fixture.read_text()
    expectations = read_expectations(source)
    # Checked as a domain module: fixtures live under tests/, which the default globs exempt.
    result = check_source(f"app/{fixture.name}", source.encode(), expectations.config(variant))
    assert_matches(result.findings, expectations.findings(variant), variant)


@pytest.mark.parametrize("fixture", CRL1_FILES, ids=lambda path: path.stem)
def test_infra_and_tests_are_exempt(fixture: Path) -> None:
    data = fixture.read_bytes()
    config = read_expectations(fixture.read_text()).config()
    for relpath in (f"app/infra/{fixture.name}", f"tests/{fixture.name}", f"app/test_{fixture.name}"):
        assert check_source(relpath, data, config).findings == ()


def test_messages_name_the_api_and_the_way_out() -> None:
    source = "import threading\nthreading.Thread(target=print)\n"
    (finding,) = check_source("app/a.py", source.encode(), Config(root=Path("/p"))).findings
    assert finding.message == "threading.Thread outside infra; enqueue a job or call an infra helper instead"
    assert (finding.line, finding.col, finding.code) == (2, 1, "CRL101")
