"""The pre-commit hooks, through the real pre-commit on a copy of this working tree.

pre-commit clones a repository's commit and pip-installs it into a hook environment (from PyPI for the
dependencies): the copy is committed as it is now, uncommitted and new files included. `try-repo` makes
a new store, so a new hook environment, on every call (14-25 s here); one test goes through it, and the
others through `pre-commit run` with a configuration naming the same commit, as a project that adopted the
hooks does, so their environment is installed once: every xdist worker uses the same copy and the same
pre-commit home (pre-commit locks its store while it installs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_corral

REPO = Path(__file__).resolve().parents[2]
PRE_COMMIT = str(Path(sys.executable).parent / "pre-commit")
SPAWNING = "import threading\n\nthreading.Thread(target=print).start()\n"


def git(*args: str, cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def working_tree_copy(destination: Path, env: dict[str, str]) -> Path:
    """This working tree's files (tracked, and untracked but not ignored) committed in a new repository."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted from the working tree is not part of it
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git("init", "-q", cwd=destination, env=env)
    git("add", "-A", cwd=destination, env=env)
    git("commit", "-q", "-m", "working tree", cwd=destination, env=env)
    return destination


@pytest.fixture(scope="session")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    # Under xdist the base temp is per worker and its parent is the run's: the copy is made there once.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(shared / "pre-commit-home"),
        **{
            f"GIT_{who}_{what}": value
            for who in ("AUTHOR", "COMMITTER")
            for what, value in (("NAME", "t"), ("EMAIL", "t@t"))
        },
    }
    repo = shared / "pre-commit-corral"
    if not repo.exists():
        draft = tmp_path_factory.mktemp("pre-commit-corral-draft")
        working_tree_copy(draft, env)
        with contextlib.suppress(OSError):  # another worker's copy got there first: use that one
            draft.rename(repo)
    return repo, env


def pre_commit(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PRE_COMMIT, *args, "--color", "never"], cwd=project, env=env, capture_output=True, text=True, timeout=280
    )


def try_repo(repo: Path, hook: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`pre-commit try-repo` of one hook: what a user runs to try the hooks before adopting them."""
    return pre_commit(project, env, "try-repo", str(repo), hook)


def run_hook(
    repo: Path, hook: str, project: Path, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """`pre-commit run HOOK` of a project whose configuration names the copy's commit, with more of its
    options (`--files ...`). The configuration lies outside the project, so it is no file of the project's."""
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    config = project.parent / f"{project.name}-pre-commit-config.yaml"
    hooks = [{"id": "corral"}, {"id": "corral-gate"}]
    config.write_text(yaml.safe_dump({"repos": [{"repo": str(repo), "rev": rev.stdout.strip(), "hooks": hooks}]}))
    return pre_commit(project, env, "run", hook, "--config", str(config), *options)


def test_hooks_file_declares_the_two_hooks() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["corral"]["entry"] == hooks["corral-gate"]["entry"] == "corral check"
    assert hooks["corral"]["types_or"] == ["python", "pyi"]
    assert hooks["corral-gate"]["pass_filenames"] is False
    assert hooks["corral-gate"]["always_run"] is True


@pytest.mark.once
@pytest.mark.timeout(600)
def test_hooks_fail_on_a_violation_and_pass_once_fixed(hooks: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, env = hooks
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "jobs.py").write_text(SPAWNING)
    # Named alone by pre-commit, these are still judged by their place: infra and tests are exempt.
    (project / "app" / "infra").mkdir()
    (project / "app" / "infra" / "pool.py").write_text(SPAWNING)
    (project / "tests").mkdir()
    (project / "tests" / "helpers.py").write_text(SPAWNING)
    (project / "README.txt").write_text("not Python\n")
    git("init", "-q", cwd=project, env=env)
    git("add", "-A", cwd=project, env=env)

    for completed in (
        try_repo(repo, "corral", project, env),
        run_hook(repo, "corral", project, env),
        run_hook(repo, "corral-gate", project, env),
    ):
        assert completed.returncode == 1, completed.stdout + completed.stderr
        assert "app/jobs.py:3:1: CRL101 threading.Thread outside infra" in completed.stdout
        assert "Found 1 finding in 1 file" in completed.stdout

    (project / "app" / "jobs.py").write_text("def enqueue(job):\n    return job\n")
    git("add", "-A", cwd=project, env=env)
    for hook in ("corral", "corral-gate"):
        completed = run_hook(repo, hook, project, env)
        assert completed.returncode == 0, completed.stdout + completed.stderr
        assert "Passed" in completed.stdout


@pytest.mark.once
@pytest.mark.timeout(600)
def test_the_per_file_hook_checks_a_python_script_without_a_suffix(
    hooks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, env = hooks
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    script = project / "scripts" / "manage"
    # pre-commit's `types: [python]` takes an executable with a Python shebang for a Python file.
    script.write_text("#!/usr/bin/env python3\n" + SPAWNING)
    script.chmod(0o755)
    git("init", "-q", cwd=project, env=env)
    git("add", "-A", cwd=project, env=env)
    completed = run_hook(repo, "corral", project, env)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "scripts/manage:4:1: CRL101 threading.Thread outside infra" in completed.stdout


def test_files_named_without_config_are_judged_by_their_place(tmp_path: Path) -> None:
    for relpath in ("app/jobs.py", "app/infra/pool.py", "tests/helpers.py"):
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_text(SPAWNING)
    # As the `corral` hook runs: from the repository's top, naming the staged files.
    completed = run_corral("check", "app/infra/pool.py", "tests/helpers.py", "app/jobs.py", cwd=tmp_path)
    assert completed.stdout.splitlines() == [
        "app/jobs.py:3:1: CRL101 threading.Thread outside infra; enqueue a job or call an infra helper instead",
        "Found 1 finding in 1 file (3 files checked).",
    ]


@pytest.mark.once
@pytest.mark.timeout(600)
def test_both_hooks_read_the_configured_baseline(hooks: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, env = hooks
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.corral]\nbaseline = "corral-baseline.json"\n')
    (project / "app" / "old.py").write_text(SPAWNING)
    run_corral("baseline", cwd=project, check=True)
    git("init", "-q", cwd=project, env=env)
    git("add", "-A", cwd=project, env=env)
    for hook in ("corral", "corral-gate"):
        completed = run_hook(repo, hook, project, env)
        assert completed.returncode == 0, completed.stdout + completed.stderr

    (project / "app" / "new.py").write_text(SPAWNING)
    git("add", "-A", cwd=project, env=env)
    for hook in ("corral", "corral-gate"):
        completed = run_hook(repo, hook, project, env)
        assert completed.returncode == 1, completed.stdout + completed.stderr
        assert "app/new.py:3:1: CRL101" in completed.stdout and "app/old.py" not in completed.stdout

    (project / "app" / "new.py").unlink()
    (project / "app" / "old.py").write_text("x = 1\n")
    git("add", "-A", cwd=project, env=env)
    for hook in ("corral", "corral-gate"):
        completed = run_hook(repo, hook, project, env)
        assert completed.returncode == 1, completed.stdout + completed.stderr
        assert "fixed: app/old.py CRL101" in completed.stdout + completed.stderr


@pytest.mark.once
@pytest.mark.timeout(600)
def test_hooks_judge_each_service_of_a_monorepo_by_its_own_settings(
    hooks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, env = hooks
    project = tmp_path / "monorepo"
    # The same thread in app/workers of two services: infra in service a's settings, not in service b's.
    for service in ("a", "b"):
        (project / "services" / service / "app" / "workers").mkdir(parents=True)
        (project / "services" / service / "app" / "workers" / "pool.py").write_text(SPAWNING)
    (project / "services/a/pyproject.toml").write_text('[tool.corral]\ninfra = ["app/workers/**"]\n')
    (project / "services/b/corral.toml").write_text("strict = true\n")
    git("init", "-q", cwd=project, env=env)
    git("add", "-A", cwd=project, env=env)
    named = ["services/a/app/workers/pool.py", "services/b/app/workers/pool.py"]
    for files in (named, named[::-1]):
        completed = run_hook(repo, "corral", project, env, "--files", *files)
        assert completed.returncode == 1, completed.stdout + completed.stderr
        assert "services/b/app/workers/pool.py:3:1: CRL101" in completed.stdout
        assert "services/a/app" not in completed.stdout
        assert "Found 1 finding in 1 file (2 files checked)." in completed.stdout
    completed = run_hook(repo, "corral-gate", project, env)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "services/b/app/workers/pool.py:3:1: CRL101" in completed.stdout
    assert "Found 1 finding in 1 file (2 files checked)." in completed.stdout
