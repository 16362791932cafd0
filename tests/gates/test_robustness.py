"""No crash and no hang on any input: generated programs, and every file of an installed environment."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import hypothesmith
import pytest
from conftest import generated_examples, run_corral
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.rules import CODES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CONFIG = Config(root=Path("/project"), extend_spawners=("gevent.spawn",), extend_network=("boto3.client",))
# Prepended so the generated programs also reach the rules, not only the parser.
PRELUDE = "import threading, asyncio, os, multiprocessing as mp\nfrom concurrent import futures\n"


def _assert_well_formed(relpath: str, data: bytes) -> None:
    result = check_source(relpath, data, CONFIG)
    for finding in result.findings:
        assert finding.code in CODES
        assert finding.line >= 1 and finding.col >= 1
        assert finding.path == relpath


# hypothesmith compiles what it generates; its SyntaxWarnings are about the programs, not corral.
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=generated_examples(150), deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar())
def test_generated_programs(source: str) -> None:
    _assert_well_formed("app/generated.py", (PRELUDE + source).encode("utf-8", "surrogatepass"))


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=generated_examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node())
def test_generated_syntax_trees(source: str) -> None:
    _assert_well_formed("app/generated.py", (PRELUDE + source).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data: bytes) -> None:
    _assert_well_formed("app/noise.py", data)


def test_every_file_of_site_packages(tmp_path: Path) -> None:
    site_packages = Path(sysconfig.get_paths()["purelib"])
    completed = subprocess.run(
        [sys.executable, "-m", "corral.gates", "check", "--no-cache", "--format", "json", str(site_packages)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert completed.returncode in (0, 1), completed.stderr
    assert "Traceback" not in completed.stderr
    document = json.loads(completed.stdout)
    assert document["files"] > 1000
    assert {finding["code"] for finding in document["findings"]} <= set(CODES)


def test_gate_runs_offline_without_importing_checked_code(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(f"import threading\nopen({str(marker)!r}, 'w').write('x')\nthreading.Thread()\n")
    completed = run_corral("check", "--no-cache", cwd=tmp_path)
    assert completed.returncode == 1
    assert not marker.exists()
