"""End-to-end fixture files: the findings the engine reports are exactly the `# error:` comments."""

from __future__ import annotations

from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from expectations import expected_findings, rule_fixture_folders

FIXTURE_FILES = [file for folder in rule_fixture_folders() for file in sorted(folder.glob("*.py"))]
CRL1_FILES = [file for file in FIXTURE_FILES if file.parent.name == "crl1"]


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_fixture(fixture: Path) -> None:
    source = fixture.read_text()
    # Checked as a domain module: fixtures live under tests/, which the default globs exempt.
    result = check_source(f"app/{fixture.name}", source.encode(), Config(root=Path("/project")))
    found = {(finding.line, finding.code) for finding in result.findings}
    assert found == expected_findings(source)


@pytest.mark.parametrize("fixture", CRL1_FILES, ids=lambda path: path.stem)
def test_infra_and_tests_are_exempt(fixture: Path) -> None:
    data = fixture.read_bytes()
    config = Config(root=Path("/project"))
    for relpath in (f"app/infra/{fixture.name}", f"tests/{fixture.name}", f"app/test_{fixture.name}"):
        assert check_source(relpath, data, config).findings == ()


def test_messages_name_the_api_and_the_way_out() -> None:
    source = "import threading\nthreading.Thread(target=print)\n"
    (finding,) = check_source("app/a.py", source.encode(), Config(root=Path("/p"))).findings
    assert finding.message == "threading.Thread outside infra; enqueue a job or call an infra helper instead"
    assert (finding.line, finding.col, finding.code) == (2, 1, "CRL101")
