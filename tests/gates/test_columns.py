"""Columns count characters, not UTF-8 bytes: on lines with accents, CJK text and emoji, every format and the
flake8 front put a finding in the column ruff, pycodestyle and GitHub give the same place."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import run_corral, run_flake8_crl

RUFF = str(Path(sys.executable).parent / "ruff")
# Each line starts a thread after text whose UTF-8 width differs from its length: 2-, 3- and 4-byte characters.
LINES = {
    "app/accents.py": 'label = "héllo wörld"; threading.Thread(target=print).start()',
    "app/cjk.py": 'label = "中文字"; threading.Thread(target=print).start()',
    "app/emoji.py": 'label = "🎉 ok 🐍"; threading.Thread(target=print).start()',
    "app/ascii.py": 'label = "plain"; threading.Thread(target=print).start()',
}
# ruff bans the same API at the same node (what `corral export ruff` configures), so its columns can be compared.
RUFF_CONFIG = '[lint.flake8-tidy-imports.banned-api]\n"threading.Thread".msg = "outside infra"\n'
Located = set[tuple[str, int, int]]


@pytest.fixture
def non_ascii(project) -> Path:
    return project({path: f"import threading\n{line}\n" for path, line in LINES.items()})


def expected() -> Located:
    return {(path, 2, line.index("threading.Thread") + 1) for path, line in LINES.items()}


def corral_output(root: Path, format_name: str) -> str:
    completed = run_corral("check", "--no-cache", "--format", format_name, cwd=root)
    assert completed.returncode == 1, completed.stderr
    return completed.stdout


def test_ruff_counts_the_same_columns(non_ascii: Path) -> None:
    (non_ascii / "ruff.toml").write_text(RUFF_CONFIG)
    completed = subprocess.run(
        [RUFF, "check", "--no-cache", "--select", "TID251", "--output-format", "concise", "."],
        cwd=non_ascii,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = {
        (path, int(line), int(col))
        for path, line, col in re.findall(r"^(\S+):(\d+):(\d+): TID251", completed.stdout, re.M)
    }
    assert found == expected()


@pytest.mark.parametrize("format_name", ["text", "markdown"])
def test_path_line_col_formats(non_ascii: Path, format_name: str) -> None:
    output = corral_output(non_ascii, format_name)
    found = {(path, int(line), int(col)) for path, line, col in re.findall(r"(app/\w+\.py):(\d+):(\d+)", output)}
    assert found == expected()


def test_json(non_ascii: Path) -> None:
    findings = json.loads(corral_output(non_ascii, "json"))["findings"]
    assert {(f["path"], f["line"], f["col"]) for f in findings} == expected()
    # The end column is a character count too: just after `threading.Thread`.
    assert {(f["path"], f["end_line"], f["end_col"]) for f in findings} == {
        (path, line, col + len("threading.Thread")) for path, line, col in expected()
    }
    # Stored in the cache and read back from it, the findings keep their columns and ends.
    for _ in range(2):
        completed = run_corral("check", "--format", "json", cwd=non_ascii)
        assert json.loads(completed.stdout)["findings"] == findings
    assert (non_ascii / ".corral_cache").is_dir()


def test_github(non_ascii: Path) -> None:
    output = corral_output(non_ascii, "github")
    found = re.findall(r"^::error file=([^,]+),line=(\d+),col=(\d+),", output, re.M)
    assert {(path, int(line), int(col)) for path, line, col in found} == expected()


def test_sarif(non_ascii: Path) -> None:
    (run,) = json.loads(corral_output(non_ascii, "sarif"))["runs"]
    assert run["columnKind"] == "unicodeCodePoints"
    found = set()
    for result in run["results"]:
        physical = result["locations"][0]["physicalLocation"]
        region = physical["region"]
        # Outside a git work tree a location is the file's absolute URI.
        uri = physical["artifactLocation"]["uri"].removeprefix(non_ascii.resolve().as_uri() + "/")
        found.add((uri, region["startLine"], region["startColumn"]))
        assert region["endColumn"] == region["startColumn"] + len("threading.Thread")
    assert found == expected()


def test_junit(non_ascii: Path) -> None:
    suites = ET.fromstring(corral_output(non_ascii, "junit"))
    texts = [failure.text or "" for failure in suites.iter("failure")]
    found = {
        (path, int(line), int(col)) for path, line, col in re.findall(r"(app/\w+\.py):(\d+):(\d+)", "\n".join(texts))
    }
    assert found == expected()


def test_flake8_counts_characters_as_its_own_pycodestyle_checks_do(non_ascii: Path) -> None:
    completed = run_flake8_crl(".", cwd=non_ascii)
    found = {
        (Path(path).as_posix().removeprefix("./"), int(line), int(col))
        for path, line, col in re.findall(r"^(\S+):(\d+):(\d+): CRL101", completed.stdout, re.M)
    }
    assert found == expected()
    # pycodestyle's E702 (the `;`) on the same lines is in characters: corral's column agrees with flake8's own.
    flake8 = Path(sys.executable).parent / "flake8"
    style = subprocess.run(
        [str(flake8), "--isolated", "--select", "E702", "."], cwd=non_ascii, capture_output=True, text=True, timeout=120
    )
    semicolons = {
        (Path(path).as_posix().removeprefix("./"), int(line), int(col))
        for path, line, col in re.findall(r"^(\S+):(\d+):(\d+): E702", style.stdout, re.M)
    }
    assert semicolons == {(path, 2, line.index(";") + 1) for path, line in LINES.items()}


def test_a_syntax_error_is_placed_where_ruff_places_it(project) -> None:
    line = 'label = ["é中🎉"] + )'
    root = project({"app/bad.py": f"import threading\nthreading.Thread()\n{line}\n"})
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.stdout.startswith(f"app/bad.py:3:{line.index(')') + 1}: CRL001 file has invalid syntax")
    ruff = subprocess.run(
        [RUFF, "check", "--isolated", "--no-cache", "--output-format", "concise", "app/bad.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ruff.stdout.startswith(f"app/bad.py:3:{line.index(')') + 1}: ")
