"""The documentation stays true to the code: generated pages are current, relative links resolve, and the
README keeps the two set-up commands a newcomer runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))

import docgen  # noqa: E402

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").rglob("*.md")])
FENCED = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def test_generated_pages_are_current() -> None:
    stale = [str(path.relative_to(REPO)) for path in docgen.stale_pages()]
    assert not stale, f"stale generated docs {stale}: run `.venv/bin/python ci/docs` and commit the result"


def test_ci_docs_check_agrees() -> None:
    script = REPO / "ci" / "docs"
    assert os.access(script, os.X_OK), "ci/docs must be executable"
    completed = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr


def test_every_config_key_has_a_meaning() -> None:
    keys = {key.name for key in docgen.read_config_keys()}
    assert keys - set(docgen.KEY_MEANINGS) == set(), "a [tool.corral] key without a meaning in ci/docgen.py"
    assert set(docgen.KEY_MEANINGS) - keys == set(), "ci/docgen.py describes a key the config does not know"


def test_every_code_is_on_its_family_page() -> None:
    codes, _, _ = docgen.read_rules()
    for code in codes:
        page = docgen.family_page(docgen.family_of(code))
        assert page.exists() and f"| {code} |" in page.read_text("utf-8"), f"{code} is missing from {page}"


def _anchors(page: Path) -> set[str]:
    """Every heading anchor GitHub gives the page (a repeated heading gets -1, -2, ...), and its `<a id>`s."""
    text = FENCED.sub("", page.read_text("utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(text):
        slug = docgen.anchor(heading.replace("`", ""))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors | set(HTML_ANCHOR.findall(text))


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    text = INLINE_CODE.sub("", FENCED.sub("", page.read_text("utf-8")))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)}: broken links {broken}"


def test_readme_keeps_the_two_set_up_commands_in_one_block() -> None:
    blocks = re.findall(r"^```sh\n(.*?)^```", (REPO / "README.md").read_text("utf-8"), re.M | re.S)
    commands = [[line.split()[0] for line in block.splitlines() if line.startswith("ci/")] for block in blocks]
    assert ["ci/example", "ci/test"] in commands
    assert [command for block in commands for command in block] == ["ci/example", "ci/test"]


def test_every_code_links_to_its_anchor_on_its_page() -> None:
    """`docs_url`, which JSON, SARIF and `corral rule` show, names a page in docs/rules/ and an anchor on it."""
    from corral.gates.outputs.rule_docs import DOCS_BASE_URL, docs_url

    codes, _, _ = docgen.read_rules()
    for code in codes:
        url = docs_url(code)
        assert url.startswith(DOCS_BASE_URL)
        page, _, fragment = url.removeprefix(DOCS_BASE_URL).partition("#")
        assert fragment in _anchors(REPO / "docs" / "rules" / page), f"{url}: no such anchor"
