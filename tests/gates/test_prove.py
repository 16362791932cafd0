"""`corral prove`: plants one violation per family in a copy and shows the gate goes red on each line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_corral

REPO = Path(__file__).resolve().parents[2]


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and ".corral_cache" not in path.parts and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_every_family_goes_red_on_the_example_service() -> None:
    before = _digest(REPO / "examples")
    completed = run_corral("prove", "examples", "--format", "json", cwd=REPO)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(completed.stdout)
    assert document["ok"] is True
    assert {plant["family"]: plant["red"] for plant in document["plants"]} == {
        "CRL1": True,
        "CRL2": True,
        "CRL3": True,
        "CRL4": True,
    }
    violations = [plant["violation"] for plant in document["plants"] if plant["family"] == "CRL4"]
    assert violations == ["a network call inside a transaction", "a job enqueued inside a transaction"]
    assert _digest(REPO / "examples") == before, "prove must never touch the project itself"


def test_the_planted_enqueue_is_reported_as_crl402(project) -> None:
    from corral.gates.cli.prove import Scratch, plant_enqueue_in_transaction
    from corral.gates.config import load_config
    from corral.gates.engine.run import check_paths

    root = project({"pyproject.toml": "[tool.corral]\n", "app/models.py": "x = 1\n"})
    config = load_config([str(root)], None)
    plant = plant_enqueue_in_transaction(Scratch(root, config, check_paths([str(root)], config, use_cache=False)))
    assert plant is not None
    found = check_paths([str(root)], config, use_cache=False).findings
    assert [(finding.line, finding.code) for finding in found if finding.path == plant.relpath] == [
        (plant.line, "CRL402")
    ]


def test_text_table(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/models.py": "x = 1\n"})
    completed = run_corral("prove", cwd=root)
    assert completed.returncode == 0, completed.stdout
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["family", "violation", "planted", "at", "gate"]
    assert "app/models.py:4" in lines[1] and lines[1].endswith("red")  # CRL1
    assert "nothing to attach to" in lines[2]  # CRL2: no job kinds here
    assert "nothing to attach to" in lines[3]  # CRL3: no runtime here
    assert lines[-1] == "every planted violation was reported"


def test_a_gate_that_cannot_go_red_fails(project) -> None:
    # Everything is infra: no domain module to plant a thread or a transaction in.
    root = project({"pyproject.toml": "[tool.corral]\ninfra = ['**']\n", "app/models.py": "x = 1\n"})
    completed = run_corral("prove", cwd=root)
    assert completed.returncode == 1
    assert "nothing to plant" in completed.stdout


def test_config_errors_exit_2(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nbogus = 1\n", "a.py": "x = 1\n"})
    completed = run_corral("prove", cwd=root)
    assert completed.returncode == 2
    assert "bogus" in completed.stderr


def test_a_root_holding_the_temporary_directory_is_copied_once(tmp_path: Path) -> None:
    """With no configuration the root is the working directory; when that holds the system's temporary
    directory (a project in /tmp), the scratch copy must not copy itself into itself."""
    root = tmp_path / "work"
    (root / "app").mkdir(parents=True)
    (root / "app" / "models.py").write_text("import requests\nfrom django.db import transaction\n")
    scratch = root / "tmp"
    scratch.mkdir()
    completed = subprocess.run(
        [sys.executable, "-m", "corral.gates", "prove", "."],
        cwd=root,
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "CRL4" in completed.stdout and "red" in completed.stdout
    assert list(scratch.iterdir()) == []
