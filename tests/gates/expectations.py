"""Expected findings written beside the code: `# error: CRL101` (or `# error: CRL101, CRL104`) on a line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

EXPECTED = re.compile(r"#.*?error:\s*(CRL\d{3}(?:\s*,\s*CRL\d{3})*)")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def expected_findings(source: str) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(source.splitlines(), 1):
        match = EXPECTED.search(line)
        if match:
            found.update((number, code.strip()) for code in match.group(1).split(","))
    return found


def example_source(example: str) -> str:
    return textwrap.dedent(example).lstrip("\n")


def rule_fixture_folders() -> list[Path]:
    """The fixture folders whose files mark expected findings with `# error:` comments."""
    return sorted(
        folder
        for folder in FIXTURES.iterdir()
        if folder.is_dir()
        and any(expected_findings(file.read_text("utf-8", "replace")) for file in folder.rglob("*.py"))
    )
