"""`corral rule`: a code's documentation from the source the rule pages are generated from, through the real CLI."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import run_corral
from corral.gates.outputs.rule_docs import code_documentation, docs_url, documented_codes
from corral.gates.rules import CODES
from corral.gates.rules.unmanaged_concurrency import UnmanagedConcurrency

REPO = Path(__file__).resolve().parents[2]
HEADER = re.compile(r"^(CRL\d{3}): (.+)$", re.MULTILINE)


def test_a_code_prints_what_why_how_and_examples(tmp_path: Path) -> None:
    completed = run_corral("rule", "crl101", cwd=tmp_path, check=True)
    text = completed.stdout
    assert text.startswith(f"CRL101: {CODES['CRL101']}\n")
    module_doc = sys.modules[UnmanagedConcurrency.__module__].__doc__ or ""
    assert module_doc.split("\n\n")[0].strip().splitlines()[0] in text
    # Only the INVALID examples that show CRL101 failing, indented; every VALID one.
    assert '    threading.Thread(target=work).start()  # error: 1 CRL101 "threading.Thread"' in text
    assert 'CRL102 "' not in text
    assert f"Documentation: {docs_url('CRL101')}" in text
    # The page ci/docs generates holds the same docstring: one source for both.
    page = (REPO / "docs" / "rules" / "crl1.md").read_text("utf-8")
    assert module_doc.strip().splitlines()[0] in page


def test_the_text_is_the_rule_pages_source_rendered(tmp_path: Path) -> None:
    completed = run_corral("rule", "CRL001", cwd=tmp_path, check=True)
    assert completed.stdout == code_documentation("CRL001", documented_codes()["CRL001"], markdown=False)


def documented(text: str) -> list[str]:
    """The codes whose documentation `text` holds, by the line that opens each: `CODE: summary`."""
    return [code for code, summary in HEADER.findall(text) if CODES.get(code) == summary]


def test_a_family_prints_each_of_its_codes(tmp_path: Path) -> None:
    completed = run_corral("rule", "CRL4", cwd=tmp_path, check=True)
    assert documented(completed.stdout) == sorted(code for code in CODES if code.startswith("CRL4"))


def test_all_and_the_list_cover_every_code(tmp_path: Path) -> None:
    every = run_corral("rule", "--all", cwd=tmp_path, check=True).stdout
    assert documented(every) == sorted(CODES)
    listing = run_corral("rule", cwd=tmp_path, check=True).stdout.splitlines()
    assert [line.split()[0] for line in listing] == sorted(CODES)
    assert all(line.endswith(docs_url(line.split()[0])) for line in listing)


def test_an_unknown_code_is_an_error_with_the_nearest(tmp_path: Path) -> None:
    typo = run_corral("rule", "CRL4O1", cwd=tmp_path)
    assert typo.returncode == 2 and typo.stdout == ""
    assert typo.stderr == "corral rule: no rule code or family 'CRL4O1'; did you mean CRL401, CRL402, CRL301?\n"
    short = run_corral("rule", "CRL10", cwd=tmp_path)
    assert short.returncode == 2 and "did you mean CRL101, CRL102, CRL103?" in short.stderr
    unrelated = run_corral("rule", "E501", cwd=tmp_path)
    assert unrelated.returncode == 2 and "`corral rule` lists every code" in unrelated.stderr
    assert "Traceback" not in typo.stderr + short.stderr + unrelated.stderr
