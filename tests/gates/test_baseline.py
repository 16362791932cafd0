"""The baseline through the real CLI: `corral baseline` writes it, `corral check --baseline` fails only on new
findings and on entries that no longer occur; and `select` (config and `--select`) for a phased roll-out."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_corral

SPAWNING = """\
import threading


def start():
    threading.Thread(target=print).start()
"""
SAME_LINE_AGAIN = "\n\ndef again():\n    threading.Thread(target=print).start()\n"
NEW_FINDING = "\n\ndef more():\n    threading.Timer(1, print).start()\n"


def _write_baseline(root: Path, *args: str) -> dict[str, object]:
    completed = run_corral("baseline", *args, cwd=root, check=True)
    assert "wrote 1 entry" in completed.stderr
    document: dict[str, object] = json.loads((root / "corral-baseline.json").read_text())
    return document


def test_baseline_accepts_what_it_holds_and_fails_on_new_findings(project) -> None:
    root = project({"app.py": SPAWNING})
    assert run_corral("check", "--no-cache", cwd=root).returncode == 1
    document = _write_baseline(root)
    assert document["version"] == 1
    [entry] = document["entries"]  # type: ignore[misc]
    assert entry["path"] == "app.py" and entry["code"] == "CRL101" and entry["occurrence"] == 0
    assert entry["text"] == "threading.Thread(target=print).start()"
    clean = run_corral("check", "--baseline", "corral-baseline.json", cwd=root)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "All checks passed" in clean.stdout and "1 finding in the baseline" in clean.stderr
    with (root / "app.py").open("a") as handle:
        handle.write(NEW_FINDING)
    new = run_corral("check", "--baseline", "corral-baseline.json", cwd=root)
    assert new.returncode == 1
    assert "app.py:9:5: CRL101 threading.Timer" in new.stdout
    assert "threading.Thread" not in new.stdout


def test_moved_and_reindented_code_keeps_its_entry(project) -> None:
    root = project({"app.py": SPAWNING})
    _write_baseline(root)
    moved = "import threading\n\n\nclass Pool:\n    '''moved'''\n\n    def start(self):\n        if True:\n"
    moved += "            threading.Thread(target=print).start()   \n"
    (root / "app.py").write_text(moved)
    completed = run_corral("check", "--baseline", "corral-baseline.json", cwd=root)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_an_identical_second_line_is_a_new_finding(project) -> None:
    root = project({"app.py": SPAWNING})
    _write_baseline(root)
    (root / "app.py").write_text(SPAWNING + SAME_LINE_AGAIN)
    completed = run_corral("check", "--baseline", "corral-baseline.json", cwd=root)
    assert completed.returncode == 1
    assert "app.py:9:5: CRL101" in completed.stdout and "app.py:5:5" not in completed.stdout


def test_a_fixed_entry_fails_until_the_baseline_is_rewritten(project) -> None:
    root = project({"app.py": SPAWNING, "other.py": "x = 1\n"})
    _write_baseline(root)
    (root / "app.py").write_text("def start():\n    print()\n")
    fixed = run_corral("check", "--baseline", "corral-baseline.json", cwd=root)
    assert fixed.returncode == 1
    # The run fails: no report may read as a clean run (the entry itself is named on stderr).
    stale = "1 entry of the baseline no longer occurs: rewrite it with corral baseline"
    assert fixed.stdout.splitlines()[-1] == f"No new findings, but {stale} (2 files checked)."
    assert "fixed: app.py CRL101 'threading.Thread(target=print).start()'" in fixed.stderr
    reports = ("--format", "github", "--format", "markdown", "-o", "summary.md", "--format", "sarif", "-o", "x.sarif")
    every = run_corral("check", "--baseline", "corral-baseline.json", *reports, cwd=root)
    assert every.returncode == 1
    assert f"::error title=corral baseline::{stale}" in every.stdout.splitlines()
    assert "**No new findings**, but" in (root / "summary.md").read_text()
    (invocation,) = json.loads((root / "x.sarif").read_text())["runs"][0]["invocations"]
    assert invocation["exitCode"] == 1
    assert [note["message"]["text"] for note in invocation["toolExecutionNotifications"]] == [stale]
    assert "re-running corral baseline" in fixed.stderr
    # Checking only another file cannot tell whether the entry still occurs: it is not reported there.
    assert run_corral("check", "other.py", "--baseline", "corral-baseline.json", cwd=root).returncode == 0
    rewritten = run_corral("baseline", cwd=root, check=True)
    assert "wrote 0 entries" in rewritten.stderr
    assert json.loads((root / "corral-baseline.json").read_text())["entries"] == []
    assert run_corral("check", "--baseline", "corral-baseline.json", cwd=root).returncode == 0


def test_baseline_of_one_path_keeps_the_entries_of_the_others(project) -> None:
    root = project({"a.py": SPAWNING, "b.py": SPAWNING})
    run_corral("baseline", cwd=root, check=True)
    (root / "a.py").write_text("x = 1\n")
    run_corral("baseline", "a.py", cwd=root, check=True)
    entries = json.loads((root / "corral-baseline.json").read_text())["entries"]
    assert [entry["path"] for entry in entries] == ["b.py"]


def test_baseline_file_is_sorted_and_stable(project) -> None:
    root = project({"b.py": SPAWNING, "a.py": SPAWNING + SAME_LINE_AGAIN})
    run_corral("baseline", "--output", "first.json", cwd=root, check=True)
    run_corral("baseline", "--output", "second.json", cwd=root, check=True)
    first = (root / "first.json").read_text()
    assert first == (root / "second.json").read_text()
    keys = [(e["path"], e["code"], e["fingerprint"], e["occurrence"]) for e in json.loads(first)["entries"]]
    assert keys == sorted(keys) and [key[3] for key in keys] == [0, 1, 0]


def test_the_config_key_makes_every_check_use_it(project) -> None:
    root = project({"app.py": SPAWNING, "pyproject.toml": '[tool.corral]\nbaseline = "ci/baseline.json"\n'})
    (root / "ci").mkdir()
    run_corral("baseline", cwd=root, check=True)
    assert (root / "ci" / "baseline.json").is_file()
    assert run_corral("check", cwd=root).returncode == 0
    # The files pre-commit names are checked against it too.
    assert run_corral("check", "app.py", cwd=root).returncode == 0


def test_a_baseline_that_cannot_be_used_is_an_error_naming_it(project) -> None:
    root = project({"app.py": SPAWNING, "broken.json": "{", "other.json": '{"version": 1, "entries": [{"path": 1}]}'})
    for name, reason in [
        ("missing.json", "no such baseline file"),
        ("broken.json", "the baseline is not valid JSON"),
        ("other.json", "entry 0 must have"),
    ]:
        completed = run_corral("check", "--baseline", name, cwd=root)
        assert completed.returncode == 2, completed.stderr
        assert f"corral: baseline error: {name}: {reason}" in completed.stderr
        assert "Traceback" not in completed.stderr
    (root / "pyproject.toml").write_text('[tool.corral]\nbaseline = "nowhere.json"\n')
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2 and "nowhere.json: no such baseline file" in completed.stderr


def test_select_runs_only_the_chosen_families_and_codes(project) -> None:
    root = project(
        {
            "app.py": SPAWNING,
            "jobs.py": "from celery import shared_task\n\n\n@shared_task\ndef work():\n    pass\n",
        }
    )
    everything = run_corral("check", "--no-cache", cwd=root)
    assert "CRL101" in everything.stdout and "CRL2" in everything.stdout
    only_crl2 = run_corral("check", "--select", "CRL2", cwd=root)
    assert "CRL101" not in only_crl2.stdout and "CRL2" in only_crl2.stdout
    assert "not run: CRL1, CRL3, CRL4)" in only_crl2.stdout
    only_crl101 = run_corral("check", "--select", "CRL101", "--format", "json", cwd=root)
    document = json.loads(only_crl101.stdout)
    assert {finding["code"] for finding in document["findings"]} == {"CRL101"}
    assert "CRL2" in document["not_run"] and "CRL102" in document["not_run"] and "CRL101" not in document["not_run"]
    # The job report is CRL2's: it does not run when CRL2 does not.
    assert "jobs" not in document
    (root / "pyproject.toml").write_text('[tool.corral]\nselect = ["CRL1"]\n')
    configured = run_corral("check", cwd=root)
    assert "CRL101" in configured.stdout and "CRL2" not in configured.stdout.replace("not run: CRL2", "")
    # `corral jobs --static` is the report itself: it lists every kind whatever the roll-out.
    assert "work" in run_corral("jobs", "--static", cwd=root).stdout


def test_select_refuses_what_the_code_table_does_not_hold(project) -> None:
    root = project({"app.py": SPAWNING})
    completed = run_corral("check", "--select", "CRL1,CRL10", cwd=root)
    assert completed.returncode == 2
    assert "--select: no rule family or code 'CRL10' (did you mean" in completed.stderr
    assert run_corral("check", "--select", "threads", cwd=root).returncode == 2
    (root / "pyproject.toml").write_text('[tool.corral]\nselect = ["CRL7"]\n')
    configured = run_corral("check", cwd=root)
    assert configured.returncode == 2
    assert "pyproject.toml: [tool.corral] key 'select': no rule family or code 'CRL7'" in configured.stderr
    (root / "pyproject.toml").write_text('[tool.corral]\nselect = "CRL1"\n')
    assert "key 'select' must be" in run_corral("check", cwd=root).stderr


def test_a_file_that_cannot_be_checked_is_reported_whatever_the_selection(project) -> None:
    root = project({"app.py": SPAWNING})
    (root / "broken.py").write_bytes(b"x = '\xff'\n")
    completed = run_corral("check", "--select", "CRL4", cwd=root)
    assert completed.returncode == 1 and "broken.py:1:1: CRL001" in completed.stdout


def test_entries_of_codes_select_leaves_out_are_neither_fixed_nor_dropped(project) -> None:
    job = "from celery import shared_task\n\n\n@shared_task\ndef work():\n    pass\n"
    root = project({"app.py": SPAWNING, "jobs.py": job})
    run_corral("baseline", cwd=root, check=True)
    codes = {entry["code"][:4] for entry in json.loads((root / "corral-baseline.json").read_text())["entries"]}
    assert codes == {"CRL1", "CRL2"}
    (root / "app.py").write_text("x = 1\n")
    narrowed = run_corral("check", "--select", "CRL2", "--baseline", "corral-baseline.json", cwd=root)
    assert narrowed.returncode == 0, narrowed.stdout + narrowed.stderr
    (root / "pyproject.toml").write_text('[tool.corral]\nselect = ["CRL1"]\n')
    assert "fixed: app.py CRL101" in run_corral("check", "--baseline", "corral-baseline.json", cwd=root).stderr
    run_corral("baseline", cwd=root, check=True)
    codes = {entry["code"][:4] for entry in json.loads((root / "corral-baseline.json").read_text())["entries"]}
    assert codes == {"CRL2"}


def test_the_connection_budget_runs_only_when_crl3_is_selected(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "service"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples", root)
    everything = json.loads(run_corral("check", "--format", "json", "--no-cache", cwd=root).stdout)
    assert everything["budget"] and "not_run" not in everything
    without = json.loads(run_corral("check", "--format", "json", "--select", "CRL1,CRL2,CRL4", cwd=root).stdout)
    assert "budget" not in without and without["not_run"] == ["CRL3"]
    only = json.loads(run_corral("check", "--format", "json", "--select", "CRL3", cwd=root).stdout)
    assert only["budget"] == everything["budget"] and "jobs" not in only
