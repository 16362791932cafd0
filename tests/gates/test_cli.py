"""The `corral check` command over small fixture projects: exit codes, output, configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_corral
from corral.gates.outputs.rule_docs import DOCS_BASE_URL

SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"


def test_clean_project_exits_0(project) -> None:
    root = project({"app/models.py": "import threading\nlock = threading.Lock()\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 0
    assert completed.stdout == "All checks passed (1 file checked).\n"


def test_findings_exit_1_with_sorted_text(project) -> None:
    root = project({"b.py": SPAWNING, "a/x.py": SPAWNING, "a/infra/ok.py": SPAWNING, "tests/test_x.py": SPAWNING})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert completed.stdout.splitlines() == [
        "a/x.py:2:1: CRL101 threading.Thread outside infra; enqueue a job or call an infra helper instead",
        "b.py:2:1: CRL101 threading.Thread outside infra; enqueue a job or call an infra helper instead",
        "Found 2 findings in 2 files (4 files checked).",
    ]


def test_json_output(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    completed = run_corral("check", "--format", "json", cwd=root)
    assert completed.returncode == 1
    document = json.loads(completed.stdout)
    assert document == {
        "version": 1,
        "root": str(root.resolve()),
        "files": 2,
        "findings": [
            {
                "path": "app/x.py",
                "line": 2,
                "col": 1,
                "code": "CRL101",
                "message": "threading.Thread outside infra; enqueue a job or call an infra helper instead",
                "end_line": 2,
                "end_col": 17,
                "absolute_path": str(root.resolve() / "app" / "x.py"),
                "docs_url": f"{DOCS_BASE_URL}crl1.md#crl101",
            }
        ],
        "jobs": [],
        "budget": [],
    }


def test_text_paths_are_relative_to_the_working_directory_and_json_paths_to_the_root(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nprocesses = 1\n", "svc/app/x.py": SPAWNING})
    completed = run_corral("check", "svc/app", cwd=root)
    assert completed.stdout.startswith("svc/app/x.py:2:1: CRL101")
    # As ruff prints them: a path the terminal can open from where the command ran.
    completed = run_corral("check", ".", cwd=root / "svc")
    assert completed.stdout.startswith("app/x.py:2:1: CRL101")
    (finding,) = json.loads(run_corral("check", ".", "--format", "json", cwd=root / "svc").stdout)["findings"]
    assert (finding["path"], finding["absolute_path"]) == ("svc/app/x.py", str(root.resolve() / "svc/app/x.py"))
    # A file outside the working directory is shown by its absolute path, as ruff shows it.
    (root / "svc" / "lib").mkdir()
    (root / "svc" / "lib" / "y.py").write_text(SPAWNING)
    completed = run_corral("check", str(root / "svc"), cwd=root / "svc" / "app")
    assert [line.split(": ")[0] for line in completed.stdout.splitlines()[:2]] == [
        "x.py:2:1",
        f"{root.resolve()}/svc/lib/y.py:2:1",
    ]


def test_config_globs_and_extend_spawners(project) -> None:
    root = project(
        {
            "pyproject.toml": """
                [tool.corral]
                infra = ["platform/**"]
                tests = ["checks/**"]
                extend-spawners = ["gevent.spawn"]
            """,
            "platform/pool.py": SPAWNING,
            "checks/x.py": SPAWNING,
            "app/infra/x.py": SPAWNING,
            "app/g.py": "import gevent\ngevent.spawn(print)\nfrom gevent import spawn\n",
        }
    )
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    found = [line.split(" ")[0:2] for line in completed.stdout.splitlines()[:-1]]
    assert found == [["app/g.py:2:1:", "CRL107"], ["app/g.py:3:20:", "CRL107"], ["app/infra/x.py:2:1:", "CRL101"]]


def test_unknown_config_key_exits_2_naming_key_and_file(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\ninfra_globs = ['x/**']\n", "a.py": "x = 1\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert "infra_globs" in completed.stderr
    assert str(root / "pyproject.toml") in completed.stderr
    assert completed.stdout == ""


def test_wrong_type_exits_2(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\ninfra = 'x/**'\n", "a.py": "x = 1\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert "'infra' must be a list of glob strings" in completed.stderr


def test_invalid_toml_exits_2(project) -> None:
    root = project({"pyproject.toml": "[tool.corral\n", "a.py": "x = 1\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert "invalid TOML" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_explicit_config_file(project) -> None:
    root = project({"settings/corral.toml": "infra = ['app/**']\n", "app/x.py": SPAWNING})
    assert run_corral("check", cwd=root).returncode == 1
    # Its folder is the root: the file's globs and paths are read from there.
    completed = run_corral("check", "--config", "settings/corral.toml", "app", cwd=root)
    assert completed.returncode == 1 and "../app/x.py" not in completed.stdout
    (root / "corral.toml").write_text("infra = ['app/**']\n")
    assert run_corral("check", "--config", "corral.toml", cwd=root).returncode == 0
    assert run_corral("check", "--config", "missing.toml", cwd=root).returncode == 2


def test_usage_errors_exit_2(project) -> None:
    root = project({"a.py": "x = 1\n"})
    assert run_corral("check", "--format", "yaml", cwd=root).returncode == 2
    assert run_corral("check", "does-not-exist", cwd=root).returncode == 2
    assert run_corral(cwd=root).returncode == 2


def test_noqa_does_not_silence_the_gate(project) -> None:
    root = project({"a.py": "import threading\nthreading.Thread()  # noqa\nthreading.Timer(1, f)  # noqa: CRL101\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert completed.stdout.count("CRL101") == 2


def test_git_work_tree_respects_gitignore(project) -> None:
    root = project({".gitignore": "generated/\n", "generated/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 0
    assert "1 file checked" in completed.stdout


def test_walk_skips_environments_and_build_folders(project) -> None:
    root = project(
        {
            "app/x.py": "x = 1\n",
            "env/pyvenv.cfg": "home = /usr\n",
            "env/lib/bad.py": SPAWNING,
            "build/lib/bad.py": SPAWNING,
            "node_modules/a/bad.py": SPAWNING,
            ".venv/bad.py": SPAWNING,
            "app/__pycache__/bad.py": SPAWNING,
            "app/notes.txt": SPAWNING,
            "app/stub.pyi": "import threading\nclass T(threading.Thread): ...\n",
        }
    )
    completed = run_corral("check", cwd=root)
    assert completed.stdout.splitlines()[-1] == "Found 1 finding in 1 file (2 files checked)."


def test_python_m_corral_gates_and_console_script_agree(project) -> None:
    root = project({"a.py": SPAWNING})
    module = run_corral("check", cwd=root)
    corral = Path(sys.executable).parent / "corral"
    script = subprocess.run([str(corral), "check"], cwd=root, capture_output=True, text=True)
    assert (script.returncode, script.stdout) == (module.returncode, module.stdout)


def test_cache_is_used_and_invalidated(project) -> None:
    root = project({"a.py": SPAWNING, "b.py": "x = 1\n"})
    first = run_corral("check", cwd=root)
    assert list((root / ".corral_cache").glob("results-*.json"))
    second = run_corral("check", cwd=root)
    assert second.stdout == first.stdout
    (root / "b.py").write_text(SPAWNING)
    third = run_corral("check", cwd=root)
    assert third.stdout.count("CRL101") == 2
    (root / "pyproject.toml").write_text("[tool.corral]\ninfra = ['**']\n")
    assert run_corral("check", cwd=root).returncode == 0


def test_no_cache_writes_nothing(project) -> None:
    root = project({"a.py": SPAWNING})
    run_corral("check", "--no-cache", cwd=root)
    assert not (root / ".corral_cache").exists()


def test_damaged_cache_is_ignored(project) -> None:
    root = project({"a.py": SPAWNING})
    run_corral("check", cwd=root)
    for file in (root / ".corral_cache").glob("results-*.json"):
        file.write_text('{"results": {"x": 1}, "stamps": []}')
    assert run_corral("check", cwd=root).stdout.count("CRL101") == 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda document: document["files"].update({"a.py": "not an entry"}),
        lambda document: document["files"]["a.py"].__setitem__(3, "not findings"),
        lambda document: document["files"]["b.py"].append([99]),  # an index past the dependency table
        lambda document: document["files"]["b.py"].append(["x"]),
        lambda document: (document["files"]["b.py"].append([0]), document.update({"dependencies": [["b", "x", 1, 2]]})),
        lambda document: document.update({"summaries": {"*summary:x:y": "not a pair"}}),
        lambda document: document.update({"summaries": []}),
    ],
    ids=["entry", "findings", "index", "index type", "record", "summary", "summaries"],
)
def test_a_damaged_entry_is_checked_again(project, damage) -> None:
    root = project({"a.py": SPAWNING, "b.py": "x = 1\n"})
    first = run_corral("check", cwd=root)
    (cache_file,) = (root / ".corral_cache").glob("results-*.json")
    document = json.loads(cache_file.read_text())
    document["files"]["b.py"][3:] = [[], {}]
    damage(document)
    cache_file.write_text(json.dumps(document))
    again = run_corral("check", cwd=root)
    assert (again.returncode, again.stdout, again.stderr) == (first.returncode, first.stdout, first.stderr)


def test_many_files_in_parallel_match_serial(project) -> None:
    files = {f"pkg/m{i}.py": (SPAWNING if i % 7 == 0 else "x = 1\n") for i in range(450)}
    root = project(files)
    completed = run_corral("check", "--no-cache", "--format", "json", cwd=root)
    document = json.loads(completed.stdout)
    assert document["files"] == 450
    assert len(document["findings"]) == len([i for i in range(450) if i % 7 == 0])


def test_self_gate() -> None:
    repo = Path(__file__).resolve().parents[2]
    # The repository passes its own gate as any user runs it: its fixture projects carry no configuration
    # of their own in the tree (the tests write it into their copies), so its settings judge them as tests.
    completed = run_corral("check", ".", "--no-cache", cwd=repo)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    nested = [*repo.glob("tests/**/pyproject.toml"), *repo.glob("tests/**/corral.toml")]
    assert nested == [], nested


def test_django_test_modules_are_tests_by_default(project) -> None:
    spawn = "import threading\nthreading.Thread(target=print).start()\n"
    root = project({"shop/tests.py": spawn, "tests.py": spawn, "shop/tests_helpers.py": spawn})
    completed = run_corral("check", "--format", "json", ".", cwd=root)
    assert completed.returncode == 1, completed.stderr
    assert {finding["path"] for finding in json.loads(completed.stdout)["findings"]} == {"shop/tests_helpers.py"}


@pytest.mark.parametrize("value", ['"boto3.client"', '["boto3"]', '["boto3..client"]', '["boto3.client()"]', "[1]"])
def test_an_extend_network_value_that_is_no_list_of_dotted_names_exits_2(project, value: str) -> None:
    root = project({"pyproject.toml": f"[tool.corral]\nextend-network = {value}\n", "a.py": "x = 1\n"})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2, completed.stdout
    assert "key 'extend-network' must be a list of dotted names like 'stripe.Charge.create'" in completed.stderr
    assert str(root / "pyproject.toml") in completed.stderr
    assert "Traceback" not in completed.stderr
