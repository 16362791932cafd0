"""A two-service monorepo: each file judged by the nearest configuration above it, through the real `corral
check` from the top and from subfolders, the real flake8, and every output format's paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git_init, run_corral, run_flake8_crl

SPAWNING = "import threading\n\nthreading.Thread(target=print).start()\n"
QUEUES = 'from corral.runtime import Queue\n\njobs = Queue("jobs", max_workers=4, timeout=30)\n'
RUNTIME = (
    "from corral.runtime import Runtime\n\nfrom app.queues import jobs\n\n"
    'runtime = Runtime(queues=[jobs], store="sqlite:///jobs.db", max_conns=10, relay=1)\n'
)
# Both services hold the same code; their settings differ where it changes a verdict. Service a counts
# app/workers as infra and runs one process (4 workers + relay 1 <= 10 x 0.5); service b keeps the default
# infra folders and runs two processes, over its budget.
RUNTIME_FILES = {"app/__init__.py": "", "app/queues.py": QUEUES, "app/runtime.py": RUNTIME}
SERVICE = {**RUNTIME_FILES, "app/workers/pool.py": SPAWNING, "app/domain.py": SPAWNING}
MONOREPO = {
    **{f"services/a/{relpath}": source for relpath, source in SERVICE.items()},
    **{f"services/b/{relpath}": source for relpath, source in SERVICE.items()},
    "services/a/pyproject.toml": '[project]\nname = "a"\n\n[tool.corral]\ninfra = ["app/workers/**"]\nprocesses = 1\n',
    "services/b/corral.toml": "processes = 2\n",
    "tools/release.py": "x = 1\n",
}
THREAD = "CRL101 threading.Thread outside infra"


def findings(stdout: str) -> list[str]:
    """Each finding line cut to `path:line:col: CODE`."""
    return [" ".join(line.split()[:2]) for line in stdout.splitlines() if ": CRL" in line]


@pytest.fixture
def monorepo(project) -> Path:
    return git_init(project(MONOREPO)).resolve()


def test_each_service_is_judged_by_its_own_settings_from_the_top(monorepo: Path) -> None:
    completed = run_corral("check", cwd=monorepo)
    assert (completed.returncode, completed.stderr) == (1, ""), completed.stdout + completed.stderr
    assert findings(completed.stdout) == [
        "services/a/app/domain.py:3:1: CRL101",
        "services/b/app/domain.py:3:1: CRL101",
        "services/b/app/runtime.py:5:11: CRL301",
        "services/b/app/workers/pool.py:3:1: CRL101",
    ]
    assert completed.stdout.splitlines()[-1] == "Found 4 findings in 4 files (11 files checked)."
    # Each budget is worked out once, in its own project: its processes, its `app.queues`.
    budget = run_corral("check", "--budget", cwd=monorepo).stdout
    assert "jobs 4 + relay 1 = 5 <= 5 (max_conns 10 x reserve 0.5)" in budget
    assert "(jobs 4 + relay 1) x processes 2 = 10 > 5 (max_conns 10 x reserve 0.5)" in budget


def test_from_a_subfolder_the_same_findings_relative_to_it(monorepo: Path) -> None:
    from_top = findings(run_corral("check", cwd=monorepo).stdout)
    completed = run_corral("check", cwd=monorepo / "services")
    assert findings(completed.stdout) == [line.removeprefix("services/") for line in from_top]
    completed = run_corral("check", cwd=monorepo / "services" / "b")
    assert findings(completed.stdout) == [
        "app/domain.py:3:1: CRL101",
        "app/runtime.py:5:11: CRL301",
        "app/workers/pool.py:3:1: CRL101",
    ]


@pytest.mark.parametrize("order", [1, -1])
def test_files_named_in_any_order_get_their_own_projects_verdict(monorepo: Path, order: int) -> None:
    # As the pre-commit hook names staged files: any subset, in any order.
    named = ["services/b/app/workers/pool.py", "tools/release.py", "services/a/app/workers/pool.py"][::order]
    completed = run_corral("check", *named, cwd=monorepo)
    assert findings(completed.stdout) == ["services/b/app/workers/pool.py:3:1: CRL101"]
    assert completed.stdout.splitlines()[-1] == "Found 1 finding in 1 file (3 files checked)."


def test_flake8_gives_each_file_the_verdict_corral_check_gives(monorepo: Path) -> None:
    files = [f"services/{service}/app/{name}" for service in "ab" for name in ("domain.py", "workers/pool.py")]
    flake8 = run_flake8_crl(*files, cwd=monorepo)
    per_file = [line for line in findings(run_corral("check", *files, cwd=monorepo).stdout) if "CRL3" not in line]
    assert [line.replace("./", "") for line in findings(flake8.stdout)] == per_file
    assert len(per_file) == 3


def test_corral_toml_wins_over_a_pyproject_beside_it(monorepo: Path) -> None:
    # As ruff prefers ruff.toml: the pyproject.toml's table beside a corral.toml does not judge anything.
    (monorepo / "services/b/pyproject.toml").write_text('[tool.corral]\ninfra = ["app/workers/**"]\n')
    completed = run_corral("check", "services/b/app/workers/pool.py", cwd=monorepo)
    assert findings(completed.stdout) == ["services/b/app/workers/pool.py:3:1: CRL101"]
    assert "services/b/pyproject.toml: [tool.corral] not read" in completed.stderr
    (monorepo / "services/b/corral.toml").unlink()
    assert run_corral("check", "services/b/app/workers/pool.py", cwd=monorepo).returncode == 0


def test_a_broken_service_is_its_own_config_error_and_the_others_still_run(monorepo: Path) -> None:
    (monorepo / "services/b/corral.toml").write_text("procesess = 2\n")
    completed = run_corral("check", cwd=monorepo)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert findings(completed.stdout) == [
        "services/a/app/domain.py:3:1: CRL101",
        "services/b/corral.toml:1:1: CRL000",
    ]
    assert "unknown key 'procesess'" in completed.stdout
    assert "corral cannot check the 5 files of this project" in completed.stdout
    # Named alone, the broken service stops the run as any unusable configuration does.
    alone = run_corral("check", "services/b", cwd=monorepo)
    assert (alone.returncode, alone.stdout) == (2, "")
    assert "unknown key 'procesess'" in alone.stderr
    # flake8 reports it on each of the service's files, and still judges the other service's.
    flake8 = run_flake8_crl("services/a/app/domain.py", "services/b/app/domain.py", cwd=monorepo)
    assert [line.split()[1] for line in flake8.stdout.splitlines()] == ["CRL101", "CRL000"]


def test_the_cache_follows_the_configuration_that_judges_each_file(monorepo: Path) -> None:
    cold = run_corral("check", cwd=monorepo)
    warm = run_corral("check", cwd=monorepo)
    assert warm.stdout == cold.stdout and findings(warm.stdout)
    assert (monorepo / "services/a/.corral_cache").is_dir() and (monorepo / "services/b/.corral_cache").is_dir()
    (monorepo / "services/b/corral.toml").write_text('processes = 2\ninfra = ["app/workers/**"]\n')
    changed = findings(run_corral("check", cwd=monorepo).stdout)
    assert "services/b/app/workers/pool.py:3:1: CRL101" not in changed
    assert "services/a/app/domain.py:3:1: CRL101" in changed


def test_a_project_below_another_is_left_out_of_its_pre_pass(project) -> None:
    # The outer project's budget sees only its own runtime, not the service's below it.
    root = project(
        {
            "pyproject.toml": "[tool.corral]\nprocesses = 1\n",
            **RUNTIME_FILES,
            **{f"services/b/{relpath}": source for relpath, source in SERVICE.items()},
            "services/b/corral.toml": "processes = 2\n",
        }
    )
    completed = run_corral("check", "--budget", "--format", "json", cwd=root)
    document = json.loads(completed.stdout)
    # Each project's report section, the outer one's first; paths relative to each root.
    assert [(entry["path"], entry["processes"], entry["ok"]) for entry in document["budget"]] == [
        ("app/runtime.py", 1, True),
        ("app/runtime.py", 2, False),
    ]
    problems = [(finding["absolute_path"], finding["code"]) for finding in document["findings"]]
    assert (str(root.resolve() / "services/b/app/runtime.py"), "CRL301") in problems
    assert not any(path.startswith(str(root.resolve() / "app")) for path, _ in problems)


def test_the_pre_pass_of_a_project_stops_at_a_folder_with_its_own_configuration(project) -> None:
    from corral.gates.analysis import modules

    root = project({"app/x.py": "", "services/b/corral.toml": "", "services/b/app/y.py": ""}).resolve()
    modules.forget()
    assert modules.project_files(root) == (str(root / "app/x.py"),)
    assert modules.project_files(root / "services/b") == (str(root / "services/b/app/y.py"),)
    # `--config FILE`: one project, every file under its root.
    assert len(modules.project_files(root, whole_tree=True)) == 2


def test_config_names_the_settings_of_every_file(monorepo: Path) -> None:
    (monorepo / "corral.toml").write_text("processes = 1\n")
    completed = run_corral("check", "--config", "corral.toml", "services", cwd=monorepo)
    # One project rooted at the top: service b's settings are not read, and `app.queues` is no module of it.
    lines = findings(completed.stdout)
    assert "services/b/app/workers/pool.py:3:1: CRL101" in lines
    assert "services/a/app/workers/pool.py:3:1: CRL101" in lines


def test_each_service_keeps_its_own_baseline(monorepo: Path) -> None:
    for config in ("services/a/pyproject.toml", "services/b/corral.toml"):
        with (monorepo / config).open("a") as settings:
            settings.write('baseline = "corral-baseline.json"\n')
    written = run_corral("baseline", cwd=monorepo)
    assert written.returncode == 0, written.stderr
    entries = {
        service: [
            entry["path"] for entry in json.loads((monorepo / service / "corral-baseline.json").read_text())["entries"]
        ]
        for service in ("services/a", "services/b")
    }
    assert entries == {
        "services/a": ["app/domain.py"],
        "services/b": ["app/domain.py", "app/runtime.py", "app/workers/pool.py"],
    }
    completed = run_corral("check", cwd=monorepo)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "4 findings in the baseline" not in completed.stderr  # told per baseline file
    (monorepo / "services/b/app/new.py").write_text(SPAWNING)
    completed = run_corral("check", cwd=monorepo)
    assert (completed.returncode, findings(completed.stdout)) == (1, ["services/b/app/new.py:3:1: CRL101"])
    # One baseline file cannot hold several projects' findings (their paths are relative to different roots).
    completed = run_corral("check", "--baseline", "corral-baseline.json", cwd=monorepo)
    assert completed.returncode == 2 and "belong to 3 projects" in completed.stderr


def test_jobs_and_fix_read_each_file_with_its_own_settings(monorepo: Path) -> None:
    assert run_corral("jobs", "--static", cwd=monorepo).returncode == 0
    (monorepo / "services/b/corral.toml").write_text("procesess = 2\n")
    broken = run_corral("jobs", "--static", cwd=monorepo)
    assert broken.returncode == 2 and "unknown key 'procesess'" in broken.stderr
    broken = run_corral("fix", "--add-timeouts", "60", cwd=monorepo)
    assert broken.returncode == 2 and "unknown key 'procesess'" in broken.stderr


# -- where each format names a file, run from a subfolder -------------------------------------------------


def test_text_is_relative_to_the_working_directory(monorepo: Path) -> None:
    completed = run_corral("check", ".", "../a/app/domain.py", cwd=monorepo / "services" / "b")
    # A file outside the working directory by its absolute path, as ruff prints it.
    assert findings(completed.stdout) == [
        f"{monorepo}/services/a/app/domain.py:3:1: CRL101",
        "app/domain.py:3:1: CRL101",
        "app/runtime.py:5:11: CRL301",
        "app/workers/pool.py:3:1: CRL101",
    ]


def test_github_annotations_name_the_file_from_the_repository_top(monorepo: Path) -> None:
    completed = run_corral("check", "--format", "github", cwd=monorepo / "services" / "b" / "app")
    files = [line.split(",")[0] for line in completed.stdout.splitlines() if line.startswith("::error")]
    assert files == [
        "::error file=services/b/app/domain.py",
        "::error file=services/b/app/runtime.py",
        "::error file=services/b/app/workers/pool.py",
    ]


def test_sarif_uris_are_relative_to_the_repository_top(monorepo: Path) -> None:
    completed = run_corral("check", "--format", "sarif", cwd=monorepo / "services" / "b")
    (run,) = json.loads(completed.stdout)["runs"]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": monorepo.as_uri() + "/"}}
    locations = [result["locations"][0]["physicalLocation"]["artifactLocation"] for result in run["results"]]
    assert locations == [
        {"uri": "services/b/app/domain.py", "uriBaseId": "%SRCROOT%"},
        {"uri": "services/b/app/runtime.py", "uriBaseId": "%SRCROOT%"},
        {"uri": "services/b/app/workers/pool.py", "uriBaseId": "%SRCROOT%"},
    ]


def test_sarif_outside_git_gives_absolute_file_uris(project) -> None:
    root = project({key: value for key, value in MONOREPO.items() if key.startswith("services/b/")}).resolve()
    completed = run_corral("check", "--format", "sarif", cwd=root / "services" / "b")
    (run,) = json.loads(completed.stdout)["runs"]
    assert "originalUriBaseIds" not in run
    locations = [result["locations"][0]["physicalLocation"]["artifactLocation"] for result in run["results"]]
    assert locations[0] == {"uri": (root / "services/b/app/domain.py").as_uri()}


def test_json_paths_are_relative_to_the_project_root_with_the_absolute_path(monorepo: Path) -> None:
    completed = run_corral("check", "--format", "json", cwd=monorepo / "services")
    document = json.loads(completed.stdout)
    assert [(finding["path"], finding["absolute_path"]) for finding in document["findings"]] == [
        ("app/domain.py", str(monorepo / "services/a/app/domain.py")),
        ("app/domain.py", str(monorepo / "services/b/app/domain.py")),
        ("app/runtime.py", str(monorepo / "services/b/app/runtime.py")),
        ("app/workers/pool.py", str(monorepo / "services/b/app/workers/pool.py")),
    ]


def test_markdown_and_junit_name_the_file_from_the_repository_top(monorepo: Path) -> None:
    here = monorepo / "services" / "b"
    markdown = run_corral("check", "--format", "markdown", cwd=here).stdout
    assert "| services/b/app/workers/pool.py:3:1 | `CRL101` |" in markdown
    junit = run_corral("check", "--format", "junit", cwd=here).stdout
    assert "services/b/app/workers/pool.py:3:1: CRL101" in junit


def test_gitlab_names_the_file_from_the_repository_top_with_a_fingerprint_per_service(monorepo: Path) -> None:
    # Both services hold the same app/domain.py: GitLab keeps one issue per fingerprint, so each is its own.
    completed = run_corral("check", "--format", "gitlab", cwd=monorepo / "services")
    assert completed.returncode == 1, completed.stderr
    issues = json.loads(completed.stdout)
    assert [issue["location"]["path"] for issue in issues] == [
        "services/a/app/domain.py",
        "services/b/app/domain.py",
        "services/b/app/runtime.py",
        "services/b/app/workers/pool.py",
    ]
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)


def test_sarif_fingerprints_read_each_line_in_its_own_project(monorepo: Path) -> None:
    (run,) = json.loads(run_corral("check", "--format", "sarif", cwd=monorepo).stdout)["runs"]
    fingerprints = [result["partialFingerprints"]["corralLineHash/v1"] for result in run["results"]]
    # The same line in both services' domain.py; runtime.py's line is another: none read as an empty line.
    assert fingerprints[0] == fingerprints[1] != fingerprints[2]
    assert run["invocations"] == [{"executionSuccessful": True}]


def test_sarif_marks_a_run_with_a_broken_service_as_failed(monorepo: Path) -> None:
    (monorepo / "services/b/corral.toml").write_text("procesess = 2\n")
    completed = run_corral("check", "--format", "sarif", "-o", "corral.sarif", cwd=monorepo)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    (run,) = json.loads((monorepo / "corral.sarif").read_text())["runs"]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert "unknown key 'procesess'" in notification["message"]["text"]
    # The other service's findings and the broken one's CRL000, each on a real file.
    locations = [
        (result["ruleId"], result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for result in run["results"]
    ]
    assert locations == [("CRL101", "services/a/app/domain.py"), ("CRL000", "services/b/corral.toml")]


def test_a_glob_matching_none_of_a_services_files_is_warned_about_from_the_top(monorepo: Path) -> None:
    a_config = monorepo / "services/a/pyproject.toml"
    a_config.write_text(a_config.read_text().replace('"app/workers/**"', '"app/workers/**", "app/plumbing/"'))
    completed = run_corral("check", cwd=monorepo)
    warning = f"corral: warning: {a_config}: [tool.corral] key 'infra': glob 'app/plumbing/' matches no file checked"
    assert completed.stderr.splitlines() == [warning]
    # A run over one of the service's files cannot tell, and says nothing.
    assert run_corral("check", "services/a/app/domain.py", cwd=monorepo).stderr == ""
