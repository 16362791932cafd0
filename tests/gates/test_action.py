"""The GitHub Action: `action.yml` is a valid composite action whose steps run `ci/action.sh`, and that
script, run here with the environment GitHub gives it (fake GITHUB_* files, a scratch project), installs
corral and writes every report from one `corral check` run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "action.sh"
CORRAL = str(Path(sys.executable).parent / "corral")
SARIF_SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())
SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"
# The keys GitHub's metadata syntax allows on a composite action's step.
STEP_KEYS = {"name", "id", "if", "shell", "run", "env", "working-directory", "uses", "with", "continue-on-error"}


def action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


def test_action_yml_is_a_composite_action_with_documented_keys() -> None:
    metadata = action()
    assert set(metadata) <= {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
    assert metadata["name"] and metadata["description"]
    assert metadata["runs"]["using"] == "composite"
    for name, declared in metadata["inputs"].items():
        assert set(declared) <= {"description", "required", "default", "deprecationMessage"}, name
        assert declared["description"] and isinstance(declared["default"], str), name
    for name, declared in metadata["outputs"].items():
        assert set(declared) == {"description", "value"}, name
    steps = metadata["runs"]["steps"]
    ids: list[str] = []
    for step in steps:
        assert set(step) <= STEP_KEYS, step
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step["shell"] == "bash", step  # a composite `run` step must name its shell
        text = yaml.safe_dump(step)
        for used in re.findall(r"inputs\.([\w-]+)", text):
            assert used in metadata["inputs"], used
        for used in re.findall(r"steps\.([\w-]+)\.outputs", text):
            assert used in ids, f"{used} is used before (or without) a step of that id"
        ids.extend([step["id"]] if "id" in step else [])
    for declared in metadata["outputs"].values():
        assert re.fullmatch(r"\$\{\{ steps\.check\.outputs\.[\w-]+ \}\}", declared["value"])


def test_the_action_runs_its_script_and_uploads_sarif_whatever_the_verdict() -> None:
    steps = action()["runs"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    assert runs == ['"$GITHUB_ACTION_PATH/ci/action.sh" install', '"$GITHUB_ACTION_PATH/ci/action.sh" check']
    (upload,) = [step for step in steps if step.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert "!cancelled()" in upload["if"]  # findings fail the check step; their report is uploaded all the same
    assert upload["with"]["sarif_file"] == "${{ steps.check.outputs.sarif-file }}"
    assert os.access(SCRIPT, os.X_OK)


def run_check(
    cwd: Path, tmp_path: Path, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], Path]:
    """`ci/action.sh check` as the action's check step runs it (the inputs' defaults, then `inputs`); its step
    outputs and the job summary file, which starts with an earlier step's line."""
    runner = tmp_path / "runner"
    runner.mkdir(exist_ok=True)
    summary, outputs = runner / "step_summary.md", runner / "github_output"
    if not summary.is_dir():
        summary.write_text("earlier step\n")
    outputs.write_text("")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "INPUT_", "CORRAL"))}
    given = {"annotations": "true", "summary": "true", "sarif": "corral.sarif", "paths": "", "args": "", **inputs}
    env.update(
        CORRAL=CORRAL,
        GITHUB_ACTIONS="true",
        GITHUB_OUTPUT=str(outputs),
        GITHUB_STEP_SUMMARY=str(summary),
        **{f"INPUT_{name.upper()}": value for name, value in given.items()},
    )
    completed = subprocess.run([str(SCRIPT), "check"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    return completed, written, summary


def test_check_annotates_summarises_and_writes_sarif_in_one_run(project, tmp_path: Path) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    # A report the action does not name is one more pair in `args`, written by the same run.
    completed, outputs, summary = run_check(root, tmp_path, args="--format junit -o junit.xml")
    assert completed.returncode == 1, completed.stderr
    assert 'failures="1"' in (root / "junit.xml").read_text()
    assert completed.stdout.startswith("::error file=app/x.py,line=2,col=1,title=CRL101::")
    assert summary.read_text().startswith("earlier step\n## corral\n")
    assert "**1 finding** in 1 of 2 checked files." in summary.read_text()
    assert outputs == {"exit-code": "1", "sarif-file": str(root / "corral.sarif")}
    sarif = json.loads((root / "corral.sarif").read_text())
    jsonschema.validators.validator_for(SARIF_SCHEMA)(SARIF_SCHEMA).validate(sarif)
    assert [result["ruleId"] for result in sarif["runs"][0]["results"]] == ["CRL101"]


def test_check_of_a_clean_project_passes_with_its_reports(project, tmp_path: Path) -> None:
    root = project({"app/y.py": "x = 1\n"})
    completed, outputs, summary = run_check(root, tmp_path, annotations="false", sarif="")
    assert (completed.returncode, completed.stdout) == (0, "All checks passed (1 file checked).\n")
    assert outputs == {"exit-code": "0"}  # no SARIF asked for: none to upload
    assert "**All checks passed**" in summary.read_text()
    assert not (root / "corral.sarif").exists()


def test_check_passes_paths_and_args_through(project, tmp_path: Path) -> None:
    root = project({"a/x.py": SPAWNING, "b/x.py": SPAWNING, "c/x.py": SPAWNING})
    completed, outputs, _ = run_check(root, tmp_path, annotations="false", paths="a\nb", args="--select CRL2")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout == "All checks passed (2 files checked; not run: CRL1, CRL3, CRL4).\n"
    assert outputs["exit-code"] == "0"


def test_check_fails_on_a_configuration_error(project, tmp_path: Path) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nnope = 1\n", "app/x.py": "x = 1\n"})
    completed, outputs, _ = run_check(root, tmp_path)
    assert completed.returncode == 2
    assert "unknown key 'nope'" in completed.stderr
    assert outputs["exit-code"] == "2"


def test_check_fails_when_the_summary_cannot_be_appended(project, tmp_path: Path) -> None:
    root = project({"app/y.py": "x = 1\n"})
    (tmp_path / "runner" / "step_summary.md").mkdir(parents=True)  # a folder cannot be appended to
    completed, outputs, _ = run_check(root, tmp_path)
    assert completed.returncode == 2
    assert "cannot append the summary" in completed.stderr
    assert outputs["exit-code"] == "2"


def working_tree(destination: Path) -> Path:
    """This working tree's sources, as the action's checkout holds them."""
    ignored = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(REPO, destination, ignore=ignored)
    return destination


@pytest.mark.once  # the installer runs the first python3 on PATH, whatever runs the tests
@pytest.mark.timeout(600)
def test_install_puts_the_actions_own_corral_in_a_virtualenv_of_its_own(tmp_path: Path) -> None:
    checkout = working_tree(tmp_path / "action")
    outputs = tmp_path / "github_output"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GITHUB_", "INPUT_", "VIRTUAL_ENV"))}
    env.update(GITHUB_ACTION_PATH=str(checkout), RUNNER_TEMP=str(tmp_path), GITHUB_OUTPUT=str(outputs))
    completed = subprocess.run(
        [str(SCRIPT), "install"], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    installed = tmp_path / "corral-venv" / "bin" / "corral"
    assert outputs.read_text() == f"corral={installed}\n"
    assert completed.stdout.startswith("corral 0.1.0 (Python ")
    location = subprocess.run(
        [str(installed.parent / "python"), "-c", "import corral.gates; print(corral.gates.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert location.startswith(str(tmp_path / "corral-venv"))  # installed, not the checkout on a path
