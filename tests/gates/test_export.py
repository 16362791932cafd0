"""`corral export ruff`: the fragment, and the real ruff flagging with it what corral bans by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import run_corral
from corral.gates.config import DEFAULT_TESTS
from corral.gates.knowledge.spawners import CALLED_ONLY, SPAWNERS

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

RUFF = str(Path(sys.executable).parent / "ruff")
DIRECT = """
    import threading
    from concurrent.futures import ThreadPoolExecutor
    import gevent

    threading.Thread(target=print).start()
    gevent.spawn(print)
    pool = ThreadPoolExecutor()
"""
CONFIG = """
    [tool.corral]
    infra = ["platform/**"]
    extend-spawners = ["gevent.spawn"]
"""


def ruff_with_the_fragment(root: Path, fragment: str) -> set[tuple[str, int]]:
    """The real ruff run on `root` with the fragment merged into its pyproject.toml: where it flags TID251."""
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n" + fragment)
    completed = subprocess.run(
        [RUFF, "check", "--no-cache", "--output-format", "json", "."], cwd=root, capture_output=True, text=True
    )
    assert completed.returncode == 1, completed.stderr
    # Only TID251 counts: ruff's own default selection (which the fragment extends) varies by version.
    return {
        (Path(item["filename"]).relative_to(root).as_posix(), item["location"]["row"])
        for item in json.loads(completed.stdout)
        if item["code"] == "TID251"
    }


def test_fragment_bans_every_named_spawner_and_exempts_infra_and_tests(project) -> None:
    root = project({"pyproject.toml": CONFIG})
    completed = run_corral("export", "ruff", cwd=root)
    assert completed.returncode == 0, completed.stderr
    ruff = tomllib.loads(completed.stdout)["tool"]["ruff"]["lint"]
    assert ruff["extend-select"] == ["TID251"]
    banned = ruff["flake8-tidy-imports"]["banned-api"]
    named = {name for name in SPAWNERS if not name.startswith("<") and name not in CALLED_ONLY}
    assert set(banned) == named | {"gevent.spawn"}
    assert "subprocess.Popen" not in banned  # a type too: ruff would ban its annotations
    assert banned["threading.Thread"]["msg"].startswith("CRL101 outside infra")
    assert banned["gevent.spawn"]["msg"].startswith("CRL107 ")
    assert ruff["per-file-ignores"] == {glob: ["TID251"] for glob in ("platform/**", *DEFAULT_TESTS)}


def test_real_ruff_flags_direct_uses_outside_infra_and_tests(project) -> None:
    root = project(
        {
            "pyproject.toml": CONFIG,
            "app/jobs.py": DIRECT,
            "platform/pool.py": DIRECT,
            "tests/test_jobs.py": DIRECT,
            "app/test_more.py": DIRECT,
        }
    )
    flagged = ruff_with_the_fragment(root, run_corral("export", "ruff", cwd=root, check=True).stdout)
    # The import and the two attribute uses; ruff does not follow the imported name to its call (line 7).
    assert flagged == {("app/jobs.py", 2), ("app/jobs.py", 5), ("app/jobs.py", 6)}
    gate = run_corral("check", "--format", "json", cwd=root)
    reported = {(f["path"], f["line"]) for f in json.loads(gate.stdout)["findings"]}
    assert reported == flagged | {("app/jobs.py", 7)}


def test_config_error_exits_2(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\ninfra = 'x'\n"})
    completed = run_corral("export", "ruff", cwd=root)
    assert completed.returncode == 2
    assert "'infra' must be a list of glob strings" in completed.stderr
    assert completed.stdout == ""
    assert run_corral("export", "mypy", cwd=root).returncode == 2


def test_extend_network_is_listed_not_banned_and_real_ruff_leaves_network_calls_alone(project) -> None:
    configured = CONFIG + '    extend-network = ["boto3.client", "stripe.Charge.create"]\n'
    network = """
        import boto3
        import gevent
        import stripe

        boto3.client("s3").list_buckets()
        stripe.Charge.create(amount=100)
        gevent.spawn(print)
    """
    root = project({"pyproject.toml": configured, "app/billing.py": network})
    fragment = run_corral("export", "ruff", cwd=root, check=True).stdout
    banned = tomllib.loads(fragment)["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    assert "gevent.spawn" in banned  # extend-spawners: banned
    assert not {"boto3.client", "stripe.Charge.create"} & set(banned)
    assert "#   boto3.client\n#   stripe.Charge.create\n" in fragment
    # gevent.spawn only: the network calls outside jobs are no finding.
    assert ruff_with_the_fragment(root, fragment) == {("app/billing.py", 7)}
