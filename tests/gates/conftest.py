"""Running the real `corral` command in fixture projects."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def generated_examples(count: int) -> int:
    """How many programs a Hypothesis test generates: ``count`` on the main Python, a quarter on the others
    (``ci/test`` sets CORRAL_TEST_GENERATED=0.25 there, to fit its budget), each run drawing new ones."""
    return max(10, round(count * float(os.environ.get("CORRAL_TEST_GENERATED", "1"))))


def run_corral(
    *args: str, cwd: Path, check: bool = False, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m corral.gates ARGS` in `cwd`; `stdin` is its input, `env` replaces the environment."""
    completed = subprocess.run(
        [sys.executable, "-m", "corral.gates", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env=env,
    )
    if check:
        assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


def run_budget(root: Path) -> tuple[int, list[str], list[dict[str, Any]]]:
    """`corral check --format json` in `root`: its exit code, its findings as `path:line:col CODE message`, and
    its budget entries."""
    completed = run_corral("check", "--format", "json", cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    document = json.loads(completed.stdout)
    found = [f"{f['path']}:{f['line']}:{f['col']} {f['code']} {f['message']}" for f in document["findings"]]
    return completed.returncode, found, document["budget"]


def run_flake8_crl(*paths: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real flake8 of this environment, corral's codes only, with no configuration but the project's."""
    flake8 = Path(sys.executable).parent / "flake8"
    return subprocess.run(
        [str(flake8), "--isolated", "--select", "CRL", *paths], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def git_init(root: Path) -> Path:
    """Make `root` a git work tree (nothing committed: corral reads untracked files that are not ignored)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True, timeout=60)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """Write a small project (relative path -> source) and return its root."""

    def make(files: dict[str, str]) -> Path:
        for relpath, source in files.items():
            target = tmp_path / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(source).lstrip("\n"))
        return tmp_path

    return make


def copy_project(source: Path, target: Path) -> None:
    """A fixture project (tests/fixtures/crl*_projects/NAME) copied to `target` as a project of its own, its
    root marked by a `pyproject.toml` with `[tool.corral]`. The marker is written here, not kept in the
    repository: there the fixtures are files of corral's own project, judged by its settings as the tests
    they are, so that `corral check .` at the top passes."""
    # Caches a run inside the checkout left there are not the copy's.
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".corral_cache", "__pycache__"))
    (target / "pyproject.toml").write_text("[tool.corral]\n")
