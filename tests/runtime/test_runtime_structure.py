"""Structure: task/thread creation only under infra/, the example service runs, the public API stays small."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import corral.runtime

REPO = Path(__file__).resolve().parents[2]

CORRAL = str(Path(sys.executable).parent / "corral")


def test_runtime_and_example_pass_the_gate() -> None:
    """Task and thread creation lives only under infra/: the real gate says so, not a look-alike."""
    completed = subprocess.run(
        [CORRAL, "check", "--no-cache", "runtime", "examples/standmeet"], cwd=REPO, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_gate_sees_a_violation_planted_in_a_copy(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "standmeet", tmp_path / "standmeet")
    with (tmp_path / "standmeet" / "notes.py").open("a") as notes:
        notes.write("\n\nimport asyncio\n\n\nasync def planted():\n    asyncio.create_task(planted())\n")
    completed = subprocess.run([CORRAL, "check", "--no-cache", "."], cwd=tmp_path, capture_output=True, text=True)
    assert completed.returncode == 1
    assert "standmeet/notes.py" in completed.stdout and "CRL104" in completed.stdout


def test_public_api_is_small() -> None:
    assert set(corral.runtime.__all__) == {
        "BudgetError",
        "ConfigError",
        "CorralRuntimeError",
        "Discard",
        "Enqueued",
        "JobArgumentError",
        "JobContext",
        "JobRequest",
        "JobStatus",
        "Queue",
        "Retry",
        "Runtime",
        "StoreUnavailable",
        "UnknownJobKind",
        "detach",
    }


def test_standmeet_example_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "standmeet" / "main.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "corpus.reindex" in result.stdout and "search 'relay' -> [1, 2]" in result.stdout
    assert "cache warmed   -> True" in result.stdout
    assert list(tmp_path.iterdir()) == []  # the example cleans up after itself
