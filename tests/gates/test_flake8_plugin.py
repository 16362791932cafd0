"""The flake8 front: the real `flake8` command with corral's plugin reports what `corral check` reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_project, run_corral, run_flake8_crl
from corral.gates.config import load_config
from corral.gates.engine.run import check_paths
from corral.gates.findings import Finding
from expectations import FIXTURES, assert_matches, read_expectations, rule_fixture_folders

FLAKE8 = str(Path(sys.executable).parent / "flake8")
# flake8 prints each finding as path, line, column, code and message, tab-separated.
FORMAT = "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s"
SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"

Found = set[tuple[str, int, int, str, str]]


def _read(file: Path) -> str:
    return file.read_text(encoding="utf-8", errors="replace")


def run_flake8(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # --isolated: no flake8 configuration file applies; --select CRL: no other plugin's codes.
    return subprocess.run(
        [FLAKE8, "--isolated", "--select", "CRL", "--format", FORMAT, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def flake8_findings(*args: str, cwd: Path, root: Path | None = None) -> Found:
    completed = run_flake8(*args, cwd=cwd)
    assert completed.returncode in (0, 1), completed.stderr
    assert "Traceback" not in completed.stderr
    found = set()
    for line in completed.stdout.splitlines():
        path, row, col, code, text = line.split("\t")
        path = Path(cwd, path).resolve().relative_to(root or cwd.resolve()).as_posix()
        found.add((path, int(row), int(col), code, text))
    return found


def corral_findings(*args: str, cwd: Path) -> Found:
    """`corral check`'s findings, less those of whole-project checks (which flake8 does not run)."""
    completed = run_corral("check", "--no-cache", "--format", "json", *args, cwd=cwd)
    assert completed.returncode in (0, 1), completed.stderr
    found = {
        (f["path"], f["line"], f["col"], f["code"], f["message"]) for f in json.loads(completed.stdout)["findings"]
    }
    return found - project_level(list(args) or ["."], cwd)


def project_level(paths: list[str], cwd: Path) -> Found:
    """The findings of the whole-project checks on `paths`: those no single file's result holds."""
    here = os.getcwd()
    os.chdir(cwd)  # paths resolve, and the root is chosen, as for the command run in `cwd`
    try:
        result = check_paths(paths, load_config(paths), use_cache=False)
    finally:
        os.chdir(here)
    per_file = {finding for file in result.results.values() for finding in file.findings}
    return {tuple(finding) for finding in result.findings if finding not in per_file}


def test_plugin_is_registered_with_flake8() -> None:
    completed = subprocess.run([FLAKE8, "--version"], capture_output=True, text=True, check=True)
    assert "corral:" in completed.stdout


def test_every_rule_family_has_fixtures() -> None:
    assert "crl1" in [folder.name for folder in rule_fixture_folders()]


@pytest.mark.parametrize("fixtures", rule_fixture_folders(), ids=lambda folder: folder.name)
def test_flake8_matches_corral_check_on_fixtures(fixtures: Path, tmp_path: Path) -> None:
    # Under app/, not tests/: the default tests globs would exempt the fixtures.
    shutil.copytree(fixtures, tmp_path / "app")
    (tmp_path / "pyproject.toml").write_text("[tool.corral]\n")
    from_flake8 = flake8_findings("app", cwd=tmp_path)
    assert from_flake8 == corral_findings("app", cwd=tmp_path)
    project = [Finding(*found) for found in project_level(["app"], tmp_path)]
    relpaths = set()
    for file in sorted(fixtures.rglob("*.py")):
        relpath = f"app/{file.relative_to(fixtures).as_posix()}"
        relpaths.add(relpath)
        expectations = read_expectations(_read(file))
        # One pyproject.toml serves the whole folder: a fixture's own options cannot apply here.
        assert not expectations.options, f"{relpath}: plain corral-config options"
        # flake8 runs no whole-project check: the expectations those findings meet are not its to report.
        expected = [
            want
            for want in expectations.findings()
            if not any(want.accepts(finding) for finding in project if finding.path == relpath)
        ]
        reported = [Finding(*found) for found in from_flake8 if found[0] == relpath]
        assert_matches(reported, expected, relpath)
    assert {found[0] for found in from_flake8} <= relpaths


def test_config_globs_apply_as_in_ci_wherever_flake8_runs(project, tmp_path: Path) -> None:
    root = project(
        {
            "svc/pyproject.toml": """
                [tool.corral]
                infra = ["platform/**"]
                tests = ["checks/**"]
                extend-spawners = ["gevent.spawn"]
            """,
            "svc/platform/pool.py": SPAWNING,
            "svc/checks/check_pool.py": SPAWNING,
            "svc/app/infra/x.py": SPAWNING,
            "svc/app/g.py": "import gevent\ngevent.spawn(print)\n",
            "svc/app/deep/er/x.py": SPAWNING,
        }
    )
    service = root / "svc"
    expected = corral_findings(cwd=service)
    assert {(path, code) for path, _, _, code, _ in expected} == {
        ("app/g.py", "CRL107"),
        ("app/infra/x.py", "CRL101"),
        ("app/deep/er/x.py", "CRL101"),
    }
    # An editor runs flake8 on one file at a time, from anywhere: the globs still apply from svc/.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    one_by_one: Found = set()
    for file in sorted(service.rglob("*.py")):
        one_by_one |= flake8_findings(str(file), cwd=elsewhere, root=service.resolve())
    assert one_by_one == expected
    assert flake8_findings(".", cwd=service) == expected
    assert flake8_findings("svc", cwd=root, root=service.resolve()) == expected


def test_without_config_paths_are_relative_to_where_flake8_runs(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/infra/y.py": SPAWNING, "tests/test_z.py": SPAWNING})
    found = flake8_findings(".", cwd=root)
    assert found == corral_findings(".", cwd=root)
    assert {path for path, *_ in found} == {"app/x.py"}


@pytest.mark.parametrize(
    ("pyproject", "problem"),
    [
        ("[tool.corral]\ninfra_globs = ['x/**']\n", "unknown key 'infra_globs'"),
        ("[tool.corral]\ninfra = 'x/**'\n", "'infra' must be a list of glob strings"),
        ("[tool.corral\n", "invalid TOML"),
        ("[tool.corral]\nselect = ['CRL7']\n", "select': no rule family or code 'CRL7'"),
    ],
    ids=["unknown-key", "wrong-type", "invalid-toml", "unknown-select"],
)
def test_config_error_is_one_crl000_finding_not_a_crash(project, pyproject: str, problem: str) -> None:
    root = project({"pyproject.toml": pyproject, "app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    completed = run_flake8("app/x.py", "app/y.py", cwd=root)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    lines = completed.stdout.splitlines()
    assert [line.split("\t")[:4] for line in lines] == [
        ["app/x.py", "1", "1", "CRL000"],
        ["app/y.py", "1", "1", "CRL000"],
    ]
    assert all(problem in line and str(root / "pyproject.toml") in line for line in lines)
    # `corral check` refuses the same configuration (exit 2, naming the problem).
    checked = run_corral("check", cwd=root)
    assert checked.returncode == 2
    assert problem in checked.stderr


def test_select_narrows_flake8_as_it_narrows_corral_check(project) -> None:
    spawning_job = SPAWNING + "from celery import shared_task\n\n\n@shared_task\ndef work():\n    pass\n"
    root = project({"pyproject.toml": "[tool.corral]\nselect = ['CRL2']\n", "app/x.py": spawning_job})
    found = flake8_findings("app/x.py", cwd=root)
    assert found and all(code.startswith("CRL2") for _, _, _, code, _ in found)
    assert found == corral_findings("app/x.py", cwd=root)


def test_flake8_noqa_silences_the_editor_never_the_gate(project) -> None:
    root = project(
        {
            "app/x.py": """
                import threading
                threading.Thread()  # noqa
                threading.Timer(1, print)  # noqa: CRL101
                threading.Thread(target=print)
            """
        }
    )
    assert {(line, code) for _, line, _, code, _ in flake8_findings(".", cwd=root)} == {(4, "CRL101")}
    gate = corral_findings(".", cwd=root)
    assert {(line, code) for _, line, _, code, _ in gate} == {(2, "CRL101"), (3, "CRL101"), (4, "CRL101")}
    assert run_corral("check", cwd=root).returncode == 1


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "utf-8"])
def test_declared_encodings_read_alike(tmp_path: Path, encoding: str) -> None:
    # "Á" is b"\xc3\x81" in UTF-8, and cp1252 cannot decode b"\x81": the plugin must not hand the engine
    # UTF-8 bytes for a file that declares another encoding.
    source = f"# -*- coding: {encoding} -*-\nimport threading\nname = 'Á'\nthreading.Thread()\n"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_bytes(source.encode(encoding))
    found = flake8_findings(".", cwd=tmp_path)
    assert found == corral_findings(".", cwd=tmp_path)
    assert {(line, code) for _, line, _, code, _ in found} == {(4, "CRL101")}


def test_undecodable_file_is_crl001_in_both(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_bytes(b"# -*- coding: no-such-codec -*-\nimport threading\nthreading.Thread()\n")
    found = flake8_findings(".", cwd=tmp_path)
    assert found == corral_findings(".", cwd=tmp_path)
    assert {code for *_, code, _ in found} == {"CRL001"}


def documented_block(language: str, marker: str) -> str:
    """The fenced `language` block of docs/integrations.md that holds `marker`."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    (block,) = [body for body in re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL) if marker in body]
    return block


def test_the_documented_require_plugins_makes_flake8_refuse_to_run_without_corral(tmp_path: Path) -> None:
    # Not `run_flake8_crl`: its --isolated ignores the configuration file this test is about.
    config = documented_block("ini", "require-plugins")
    (tmp_path / "x.py").write_text(SPAWNING)
    (tmp_path / ".flake8").write_text(config)
    with_corral = subprocess.run([FLAKE8, "x.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert with_corral.returncode == 1
    assert with_corral.stdout.startswith("x.py:2:1: CRL101 ")
    # What a flake8 environment without corral does under that setting, shown with a plugin that is missing.
    (tmp_path / ".flake8").write_text(config.replace("= corral", "= corral-not-installed"))
    without = subprocess.run([FLAKE8, "x.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert without.returncode != 0
    assert "required plugins were not installed" in without.stdout + without.stderr


def test_the_documented_pre_commit_flake8_hook_installs_corral_beside_flake8() -> None:
    config = yaml.safe_load(documented_block("yaml", "additional_dependencies"))
    (hook,) = [hook for repo in config["repos"] if repo["repo"].endswith("/flake8") for hook in repo["hooks"]]
    assert hook["id"] == "flake8"
    assert hook["additional_dependencies"] == ["corral"]


def _variant_runs() -> list[tuple[Path, str]]:
    """Every fixture run under settings of its own (`# corral-config[variant]:`: `extend-network`, `strict`...)."""
    return [
        (file, variant)
        for folder in rule_fixture_folders()
        for file in sorted(folder.rglob("*.py"))
        for variant in read_expectations(_read(file)).variant_options
    ]


@pytest.mark.parametrize(
    ("fixture", "variant"), _variant_runs(), ids=lambda value: value if isinstance(value, str) else value.stem
)
def test_flake8_matches_corral_check_on_fixture_variants(fixture: Path, variant: str, tmp_path: Path) -> None:
    # The folder-wide run above has one configuration; each variant's settings get a project of their own.
    shutil.copytree(fixture.parent, tmp_path / "app")
    expectations = read_expectations(_read(fixture))
    options = {**expectations.options, **expectations.variant_options[variant]}
    settings = "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    (tmp_path / "pyproject.toml").write_text(f"[tool.corral]\n{settings}")
    relpath = f"app/{fixture.name}"
    from_flake8 = flake8_findings(relpath, cwd=tmp_path)
    assert from_flake8 == corral_findings(relpath, cwd=tmp_path)
    project = [Finding(*found) for found in project_level([relpath], tmp_path)]
    expected = [
        want
        for want in expectations.findings(variant)
        if not any(want.accepts(finding) for finding in project if finding.path == relpath)
    ]
    assert_matches([Finding(*found) for found in from_flake8], expected, f"{relpath} [{variant}]")


def _plant_message(root: Path, relpath: str, message: str) -> None:
    """Rewrite the message of every finding the gate's cache stores for `relpath`."""
    (cache_file,) = (root / ".corral_cache").glob("results-*.json")
    document = json.loads(cache_file.read_text())
    entry = document["files"][relpath]  # [mtime ns, size, key, findings, facts, ...]
    for finding in entry[3]:
        finding[3] = message
    cache_file.write_text(json.dumps(document))


def test_flake8_answers_an_unchanged_file_from_the_cache_corral_check_left(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/a.py": SPAWNING})
    assert run_corral("check", cwd=root).returncode == 1
    # What the plugin reports for an unchanged file is the stored result (here, one the test planted).
    _plant_message(root, "app/a.py", "planted in the cache")
    completed = run_flake8_crl("app/a.py", cwd=root)
    assert completed.stdout.splitlines() == ["app/a.py:2:1: CRL101 planted in the cache"], completed.stderr
    # Changed bytes are checked again.
    (root / "app" / "a.py").write_text("\n" + SPAWNING)
    completed = run_flake8_crl("app/a.py", cwd=root)
    assert [line.split(": ")[0] for line in completed.stdout.splitlines()] == ["app/a.py:3:1"]
    assert "planted" not in completed.stdout


def test_flake8_checks_again_a_file_whose_cached_result_no_longer_holds(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    copy_project(FIXTURES / "crl4_projects" / "shop", root)
    assert run_corral("check", cwd=root).returncode == 1
    _plant_message(root, "shop/views.py", "planted in the cache")
    assert "planted in the cache" in run_flake8_crl("shop/views.py", cwd=root).stdout
    # The helper two modules away stops calling the network: the stored result is not served, whatever it says.
    partners = root / "shop" / "partners.py"
    partners.write_text(
        partners.read_text().replace("    return requests.post(url, json=payload, timeout=5)", "    return url")
    )
    completed = run_flake8_crl("shop/views.py", cwd=root)
    assert (completed.returncode, completed.stdout) == (0, ""), completed.stderr


def test_flake8_checks_every_file_past_a_damaged_cache(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/a.py": SPAWNING})
    run_corral("check", cwd=root)
    (cache_file,) = (root / ".corral_cache").glob("results-*.json")
    for damage in ('{"files": {"app/a.py": [1, 2]}, "dependencies": "x"}', "{not json", ""):
        cache_file.write_text(damage)
        completed = run_flake8_crl("app/a.py", cwd=root)
        assert [line.split(";")[0] for line in completed.stdout.splitlines()] == [
            "app/a.py:2:1: CRL101 threading.Thread outside infra"
        ], completed.stderr
