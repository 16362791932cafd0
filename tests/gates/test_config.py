"""`[tool.corral]` through the real `corral check` and the real flake8: kebab-case keys and their old spellings,
"did you mean" for what is misspelt, the gitignore semantics of the globs, and the files a run checks."""

from __future__ import annotations

import json

import pytest
from conftest import run_corral, run_flake8_crl

SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"
# A Celery worker whose connections persist: CRL301 against max-conns x reserve when max-conns is 8.
CELERY_SETTINGS = 'DATABASES = {"default": {"CONN_MAX_AGE": None}}\nCELERY_WORKER_CONCURRENCY = 16\n'


def findings(completed_stdout: str) -> set[tuple[str, str]]:
    return {(finding["path"], finding["code"]) for finding in json.loads(completed_stdout)["findings"]}


def test_kebab_case_max_conns_is_read(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nmax-conns = 8\n", "shop/settings.py": CELERY_SETTINGS})
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 1, completed.stderr
    assert "concurrency 16 x processes 1 = 16 > 4 (max_conns 8 x reserve 0.5)" in completed.stdout
    assert "raise [tool.corral] max-conns" in completed.stdout
    assert completed.stderr == ""


def test_old_snake_case_spelling_still_reads_with_a_deprecation_warning(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nmax_conns = 8\n", "shop/settings.py": CELERY_SETTINGS})
    old = run_corral("check", "--no-cache", cwd=root)
    (root / "pyproject.toml").write_text("[tool.corral]\nmax-conns = 8\n")
    new = run_corral("check", "--no-cache", cwd=root)
    assert (old.returncode, old.stdout) == (new.returncode, new.stdout) == (1, new.stdout)
    assert old.stderr == (
        f"corral: warning: {root / 'pyproject.toml'}: [tool.corral] key 'max_conns' is deprecated;"
        " spell it 'max-conns'\n"
    )
    assert new.stderr == ""


def test_old_spelling_warns_in_flake8_too_without_failing(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nmax_conns = 8\n", "app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    completed = run_flake8_crl("app/x.py", "app/y.py", cwd=root)
    assert completed.returncode == 1
    assert [line.split(" ")[1] for line in completed.stdout.splitlines()] == ["CRL101"]
    assert "key 'max_conns' is deprecated; spell it 'max-conns'" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("order", [("max_conns", "max-conns"), ("max-conns", "max_conns")])
def test_both_spellings_of_one_key_are_a_config_error(project, order: tuple[str, str]) -> None:
    first, second = order
    root = project({"pyproject.toml": f"[tool.corral]\n{first} = 8\n{second} = 9\n", "app/x.py": SPAWNING})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert f"sets 'max-conns' twice, as '{first}' and '{second}'; keep 'max-conns'" in completed.stderr
    assert completed.stdout == ""
    flake8 = run_flake8_crl("app/x.py", cwd=root)
    assert [line.split(" ")[1] for line in flake8.stdout.splitlines()] == ["CRL000"]
    assert "sets 'max-conns' twice" in flake8.stdout


@pytest.mark.parametrize(
    ("table", "hint"),
    [
        ("extend_network = ['boto3.client']", "unknown key 'extend_network' (did you mean 'extend-network'?)"),
        ("max_file_size = 10", "unknown key 'max_file_size' (did you mean 'max-file-size'?)"),
        ("infra_globs = ['x/**']", "unknown key 'infra_globs' (did you mean 'infra'?)"),
        ("stricct = true", "unknown key 'stricct' (did you mean 'strict'?)"),
        ("zzz = 1", "unknown key 'zzz' (known keys: baseline, extend-network,"),
        # ruff's habit of a [tool.X.lint] table: the keys it holds are corral's own.
        ("[tool.corral.lint]\nselect = ['CRL1']", "unknown key 'lint' (its keys belong in [tool.corral] itself"),
        ("select = ['CRL41']", "no rule family or code 'CRL41' (did you mean"),
    ],
    ids=["kebab", "kebab-2", "near", "typo", "far", "nested-table", "enumerated-value"],
)
def test_misspelt_key_or_value_names_the_nearest(project, table: str, hint: str) -> None:
    root = project({"pyproject.toml": f"[tool.corral]\n{table}\n", "app/x.py": SPAWNING})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert hint in completed.stderr
    flake8 = run_flake8_crl("app/x.py", cwd=root)
    assert [line.split(" ")[1] for line in flake8.stdout.splitlines()] == ["CRL000"]
    assert hint in flake8.stdout


GLOB_PROJECT = {
    "app/infra/pool.py": SPAWNING,
    "app/infra/legacy/old.py": SPAWNING,
    "bpp/infra/pool.py": SPAWNING,
    "cpp/infra/pool.py": SPAWNING,
    "services/a/platform/pool.py": SPAWNING,
    "platform/pool.py": SPAWNING,
    "platform.py": SPAWNING,
    "app/jobs.py": SPAWNING,
}


@pytest.mark.parametrize(
    ("infra", "exempt"),
    [
        # A pattern without a slash matches at any depth, and a folder matches everything below it.
        (["platform"], {"platform/pool.py", "services/a/platform/pool.py"}),
        (["platform/"], {"platform/pool.py", "services/a/platform/pool.py"}),
        # A slash (leading or inside) anchors it at the root.
        (["/platform"], {"platform/pool.py"}),
        (["app/infra"], {"app/infra/pool.py", "app/infra/legacy/old.py"}),
        (["[ab]pp/infra/"], {"app/infra/pool.py", "app/infra/legacy/old.py", "bpp/infra/pool.py"}),
        # As documented before: `**` spans folders (also none), `*` stays within one.
        (["**/infra/**"], {"app/infra/pool.py", "app/infra/legacy/old.py", "bpp/infra/pool.py", "cpp/infra/pool.py"}),
        (["*/infra/*.py"], {"app/infra/pool.py", "bpp/infra/pool.py", "cpp/infra/pool.py"}),
        # The last pattern a path matches decides: a negation takes files back.
        (["**/infra/**", "!app/infra/legacy/"], {"app/infra/pool.py", "bpp/infra/pool.py", "cpp/infra/pool.py"}),
    ],
)
def test_infra_globs_follow_gitignore_semantics(project, infra: list[str], exempt: set[str]) -> None:
    root = project({"pyproject.toml": f"[tool.corral]\ninfra = {json.dumps(infra)}\n", **GLOB_PROJECT})
    completed = run_corral("check", "--no-cache", "--format", "json", cwd=root)
    assert completed.returncode == 1, completed.stderr
    assert findings(completed.stdout) == {(path, "CRL101") for path in GLOB_PROJECT if path not in exempt}
    assert completed.stderr == ""  # every glob matched a file
    flake8 = run_flake8_crl(".", cwd=root)
    assert {line.split(":")[0].removeprefix("./") for line in flake8.stdout.splitlines()} == set(GLOB_PROJECT) - exempt


def test_tests_globs_follow_gitignore_semantics(project) -> None:
    root = project(
        {
            "pyproject.toml": '[tool.corral]\ntests = ["checks/", "!checks/live/"]\n',
            "checks/unit/a.py": SPAWNING,
            "checks/live/b.py": SPAWNING,
        }
    )
    completed = run_corral("check", "--no-cache", "--format", "json", cwd=root)
    assert findings(completed.stdout) == {("checks/live/b.py", "CRL101")}


def test_a_glob_that_matches_no_file_is_a_warning_naming_key_and_glob(project) -> None:
    root = project(
        {
            "pyproject.toml": '[tool.corral]\ninfra = ["app/infra/", "platfrom/"]\ntests = ["checks/**"]\n',
            "app/infra/pool.py": SPAWNING,
            "app/jobs.py": "x = 1\n",
        }
    )
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 0
    source = root / "pyproject.toml"
    assert completed.stderr.splitlines() == [
        f"corral: warning: {source}: [tool.corral] key 'infra': glob 'platfrom/' matches no file checked",
        f"corral: warning: {source}: [tool.corral] key 'tests': glob 'checks/**' matches no file checked",
    ]
    # A run over some of the files (pre-commit's staged files) cannot tell: it says nothing.
    assert run_corral("check", "--no-cache", "app/jobs.py", cwd=root).stderr == ""


def test_the_default_globs_are_not_warned_about(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/jobs.py": "x = 1\n"})
    completed = run_corral("check", "--no-cache", cwd=root)
    assert (completed.returncode, completed.stderr) == (0, "")


@pytest.mark.parametrize("glob", ["", "#app", "/", "!", "app\\"])
def test_a_glob_that_is_no_pattern_is_a_config_error(project, glob: str) -> None:
    root = project({"pyproject.toml": f"[tool.corral]\ninfra = [{json.dumps(glob)}]\n", "app/x.py": SPAWNING})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 2
    assert "key 'infra' must be a list of glob strings (gitignore patterns)" in completed.stderr


SHEBANG_SCRIPT = "#!/usr/bin/env python3\n" + SPAWNING


def test_a_file_named_explicitly_is_checked_whatever_its_suffix(project) -> None:
    root = project({"scripts/manage": SHEBANG_SCRIPT, "app/jobs.py": "x = 1\n"})
    completed = run_corral("check", "--no-cache", "scripts/manage", cwd=root)
    assert completed.returncode == 1
    assert completed.stdout.startswith("scripts/manage:3:1: CRL101 threading.Thread outside infra")
    # A folder still yields only its Python sources.
    assert run_corral("check", "--no-cache", ".", cwd=root).returncode == 0


def test_a_run_that_finds_no_file_says_so_and_exits_0(project) -> None:
    root = project({"docs/README.txt": "no Python here\n"})
    completed = run_corral("check", "--no-cache", "docs", cwd=root)
    assert completed.returncode == 0
    assert completed.stderr == "corral: warning: no Python files found under docs\n"
    assert "0 files checked" in completed.stdout


def test_export_translates_gitignore_globs_for_ruff(project) -> None:
    config = '[tool.corral]\ninfra = ["platform/", "app/infra", "!app/infra/legacy/"]\ntests = ["**/t/**"]\n'
    root = project({"pyproject.toml": config})
    completed = run_corral("export", "ruff", cwd=root)
    assert completed.returncode == 0, completed.stderr
    fragment = completed.stdout.split("[tool.ruff.lint.per-file-ignores]\n")
    assert '# "!app/infra/legacy/" takes files back: per-file-ignores cannot, so ruff exempts them too' in fragment[0]
    assert fragment[1].splitlines() == [
        '"**/platform" = ["TID251"]',
        '"**/platform/**" = ["TID251"]',
        '"app/infra" = ["TID251"]',
        '"app/infra/**" = ["TID251"]',
        '"**/t/**" = ["TID251"]',
    ]
