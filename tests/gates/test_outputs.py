"""The CI formats (`github`, `sarif`, `markdown`, `junit`) and the GitHub Actions example workflow."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import run_corral
from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding
from corral.gates.outputs.github import render_github
from corral.gates.outputs.junit import render_junit
from corral.gates.outputs.markdown import render_markdown
from corral.gates.rules import CODES

REPO = Path(__file__).resolve().parents[2]
SARIF_SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())
SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"
MESSAGE = "threading.Thread outside infra; enqueue a job or call an infra helper instead"
# A path and message holding what each format must escape.
AWKWARD = Finding("app/a,b:c%d_e.py", 3, 5, "CRL101", "100% <bad> | x_y *z* & `q`\r\nline two")


def result_with(*findings: Finding) -> CheckResult:
    return CheckResult(Path("/project"), 4, sorted(findings), {}, {})


def test_github_workflow_commands(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    completed = run_corral("check", "--format", "github", cwd=root)
    assert completed.returncode == 1
    assert completed.stdout.splitlines() == [
        f"::error file=app/x.py,line=2,col=1,title=CRL101::{MESSAGE}",
        "Found 1 finding in 1 file (2 files checked).",
    ]


def test_github_escapes_data_and_properties() -> None:
    (line, _) = render_github(result_with(AWKWARD)).splitlines()
    assert line == (
        "::error file=app/a%2Cb%3Ac%25d_e.py,line=3,col=5,title=CRL101::100%25 <bad> | x_y *z* & `q`%0D%0Aline two"
    )


def sarif_for(root: Path) -> dict:
    completed = run_corral("check", "--format", "sarif", cwd=root)
    document = json.loads(completed.stdout)
    jsonschema.validators.validator_for(SARIF_SCHEMA)(SARIF_SCHEMA).validate(document)
    return document


def test_sarif_is_valid_2_1_0_with_a_rule_per_code(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/my dir/y.py": "import os\nos.fork()\n"})
    (run,) = sarif_for(root)["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == sorted(CODES)
    for rule in rules:
        assert rule["shortDescription"]["text"] == CODES[rule["id"]]
        assert CODES[rule["id"]] in rule["help"]["text"]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == root.resolve().as_uri() + "/"
    located = []
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uriBaseId"] == "SRCROOT"
        region = physical["region"]
        located.append(
            (physical["artifactLocation"]["uri"], region["startLine"], region["startColumn"], result["ruleId"])
        )
    assert located == [("app/my%20dir/y.py", 2, 1, "CRL102"), ("app/x.py", 2, 1, "CRL101")]


def test_sarif_for_a_clean_project_is_valid_and_empty(project) -> None:
    (run,) = sarif_for(project({"app/x.py": "x = 1\n"}))["runs"]
    assert run["results"] == []


def test_markdown_summary(project) -> None:
    root = project({"app/x.py": SPAWNING + "threading.Timer(1, print)\n", "app/y.py": "x = 1\n"})
    completed = run_corral("check", "--format", "markdown", cwd=root)
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    assert lines[0] == "## corral"
    assert "**2 findings** in 1 of 2 checked files." in lines
    assert f"| `CRL101` | {CODES['CRL101']} | 2 |" in lines
    assert f"| `CRL102` | {CODES['CRL102']} | 0 |" in lines
    assert f"| app/x.py:2:1 | `CRL101` | {MESSAGE} |" in lines
    clean = render_markdown(result_with())
    assert "**All checks passed** (4 files checked)." in clean.splitlines()
    assert "### Findings" not in clean


def test_markdown_cells_cannot_break_the_table() -> None:
    rows = [line for line in render_markdown(result_with(AWKWARD)).splitlines() if line.startswith("| app")]
    assert rows == [
        r"| app/a,b:c%d\_e.py:3:5 | `CRL101` | 100% \<bad\> \| x\_y \*z\* &amp; \`q\`  line two |",
    ]


def test_junit_has_a_case_per_rule_family(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "import os\nos.fork()\n"})
    completed = run_corral("check", "--format", "junit", cwd=root)
    assert completed.returncode == 1
    suites = ET.fromstring(completed.stdout)
    (suite,) = suites
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert sorted(cases) == sorted({code[:4] for code in CODES})
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == suites.get("failures") == "1"
    failure = cases["CRL1"].find("failure")
    assert failure is not None
    assert failure.get("message") == "2 findings"
    assert failure.text is not None
    assert failure.text.splitlines() == [
        f"app/x.py:2:1: CRL101 {MESSAGE}",
        f"app/y.py:2:1: CRL102 {MESSAGE.replace('threading.Thread', 'os.fork')}",
    ]
    assert all(case.find("failure") is None for name, case in cases.items() if name != "CRL1")


def test_junit_is_valid_xml_whatever_the_text() -> None:
    odd = AWKWARD._replace(message='bell \x07 escape \x1b <tag> & "quotes" ]]>')
    suites = ET.fromstring(render_junit(result_with(odd)))
    failure = suites.find("./testsuite/testcase[@name='CRL1']/failure")
    assert failure is not None and failure.text is not None
    assert 'bell \ufffd escape \ufffd <tag> & "quotes" ]]>' in failure.text


def test_github_actions_example_uses_the_action_and_uploads_sarif() -> None:
    workflow = yaml.safe_load((REPO / "ci" / "github-actions-example.yml").read_text())
    inputs = yaml.safe_load((REPO / "action.yml").read_text())["inputs"]
    steps = workflow["jobs"]["gate"]["steps"]
    (gate,) = [step for step in steps if step.get("uses", "").endswith("/corral@v0.1.0")]
    assert set(gate["with"]) <= set(inputs)
    assert gate["with"]["upload-sarif"] == "true"
    assert steps.index(gate) > steps.index({"uses": "actions/checkout@v4"})
    assert workflow["permissions"]["security-events"] == "write"


@pytest.mark.parametrize("format_name", ["github", "sarif", "markdown", "junit"])
def test_every_format_is_a_check_choice(project, format_name: str) -> None:
    completed = run_corral("check", "--format", format_name, cwd=project({"a.py": "x = 1\n"}))
    assert completed.returncode == 0, completed.stderr


GITHUB_ENV = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/shop", "GITHUB_SHA": "0123abc"}


def markdown_env(**env: str) -> dict[str, str]:
    return {**{key: value for key, value in os.environ.items() if not key.startswith("GITHUB_")}, **env}


def test_markdown_shows_the_rules_that_fired_and_folds_the_full_table(project) -> None:
    root = project({"app/x.py": SPAWNING + "threading.Timer(1, print)\n", "app/y.py": "x = 1\n"})
    summary = run_corral("check", "--format", "markdown", cwd=root, env=markdown_env()).stdout
    fired, folded = summary.split("<details>\n")
    assert f"| `CRL101` | {CODES['CRL101']} | 2 |" in fired.splitlines()
    assert "CRL102" not in fired
    assert f"<summary>Every rule ({len(CODES)})</summary>" in folded
    assert f"| `CRL102` | {CODES['CRL102']} | 0 |" in folded.splitlines()
    assert folded.endswith("</details>\n")
    # Without the GitHub variables (or outside a work tree) a location is plain text, never a guessed link.
    assert f"| app/x.py:2:1 | `CRL101` | {MESSAGE} |" in fired.splitlines()
    assert "](" not in run_corral("check", "--format", "markdown", cwd=root, env=markdown_env(**GITHUB_ENV)).stdout


def test_markdown_links_each_location_to_its_line_in_the_repository(project) -> None:
    repository = project({
        "services/mail/pyproject.toml": "[tool.corral]\n",
        "services/mail/app/my dir/x.py": SPAWNING,
    })  # fmt: skip
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    mail = repository / "services" / "mail"
    completed = run_corral("check", "--format", "markdown", cwd=mail, env=markdown_env(**GITHUB_ENV))
    assert completed.returncode == 1, completed.stderr
    link = "https://github.com/acme/shop/blob/0123abc/services/mail/app/my%20dir/x.py#L2"
    assert f"| [app/my dir/x.py:2:1]({link}) | `CRL101` | {MESSAGE} |" in completed.stdout.splitlines()
    # One variable missing: no link.
    partial = markdown_env(**{**GITHUB_ENV, "GITHUB_SHA": ""})
    assert "](" not in run_corral("check", "--format", "markdown", cwd=mail, env=partial).stdout


def test_markdown_says_what_select_left_out(project) -> None:
    root = project({"app/x.py": "x = 1\n"})
    summary = run_corral("check", "--format", "markdown", "--select", "CRL1", cwd=root).stdout
    assert "Not run (`select`): CRL2, CRL3, CRL4." in summary.splitlines()
