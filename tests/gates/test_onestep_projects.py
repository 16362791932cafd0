"""Fixture projects of the calls one step away (issue 12): each file marks the findings it expects with
`# error: COL CODE "message fragment"`, checked through the real command on the project copied whole, and
through flake8 one file at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import copy_project, run_corral
from corral.gates.findings import Finding
from expectations import FIXTURES, assert_matches, read_expectations
from test_flake8_plugin import corral_findings, flake8_findings

PROJECTS = [
    FIXTURES / "crl4_projects" / "held_clients",
    FIXTURES / "crl4_projects" / "super_calls",
    FIXTURES / "crl4_projects" / "atomic_objects",
    FIXTURES / "crl4_projects" / "consumed_callables",
    FIXTURES / "crl4_projects" / "wrapper_aliases",
    FIXTURES / "crl4_projects" / "returned_openers",
    FIXTURES / "crl2_projects" / "reexported_jobs",
]


@pytest.fixture(params=PROJECTS, ids=lambda root: root.name)
def checked(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    """The fixture project and its copy, rooted as a project of its own."""
    target = tmp_path / request.param.name
    copy_project(request.param, target)
    return request.param, target


def test_the_command_reports_what_each_file_expects(checked: tuple[Path, Path]) -> None:
    fixture, root = checked
    completed = run_corral("check", "--no-cache", "--format", "json", cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    reported = [
        Finding(*(finding[field] for field in ("path", "line", "col", "code", "message")))
        for finding in json.loads(completed.stdout)["findings"]
    ]
    relpaths = set()
    for file in sorted(fixture.rglob("*.py")):
        relpath = file.relative_to(fixture).as_posix()
        relpaths.add(relpath)
        expected = read_expectations(file.read_text()).findings()
        assert_matches([finding for finding in reported if finding.path == relpath], expected, relpath)
    assert {finding.path for finding in reported} <= relpaths


def test_flake8_one_file_at_a_time_reports_what_the_command_does(checked: tuple[Path, Path]) -> None:
    _, root = checked
    one_by_one = set()
    for file in sorted(root.rglob("*.py")):
        one_by_one |= flake8_findings(file.relative_to(root).as_posix(), cwd=root)
    assert one_by_one == corral_findings(cwd=root)


def finding_places(root: Path) -> list[str]:
    completed = run_corral("check", cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    return [line.split(": CRL")[0] for line in completed.stdout.splitlines()[:-1]]


def test_a_cached_result_follows_the_module_that_builds_the_client(tmp_path: Path) -> None:
    root = tmp_path / "held_clients"
    copy_project(FIXTURES / "crl4_projects" / "held_clients", root)
    warm = finding_places(root)
    assert "app/views.py:14:9" in warm and "app/jobs.py:12:5" in warm
    clients = root / "app" / "clients.py"
    original = clients.read_text()
    # The session is no client any more: the verdicts of the modules importing it must not be served.
    clients.write_text(original.replace("session = requests.Session()", "session = object()"))
    assert finding_places(root) == ["app/jobs.py:18:5", "app/views.py:20:9"]
    clients.write_text(original)
    assert finding_places(root) == warm


def test_a_cached_result_follows_the_base_class_super_reaches(tmp_path: Path) -> None:
    root = tmp_path / "super_calls"
    copy_project(FIXTURES / "crl4_projects" / "super_calls", root)
    warm = finding_places(root)
    assert len(warm) == 4
    base = root / "app" / "base.py"
    # Synced.save stops calling the network: the subclasses' cached findings at super().save() must go.
    base.write_text(base.read_text().replace('requests.post("https://search.example/sync"', 'print("sync"'))
    assert finding_places(root) == ["app/models.py:15:9"]


def test_a_cached_result_keeps_the_modules_an_answer_shared_within_one_file_read(project) -> None:
    # Checking a_views.py walks helpers.first, then helpers.second; both resolve `clients.session`, the
    # second from the answer the first computed. b_views.py reuses the walk of helpers.second: its cached
    # verdict must still depend on clients.py, which that shared answer read.
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/clients.py": "import requests\n\nsession = requests.Session()\n",
            "app/helpers.py": (
                "from app import clients\n\n\ndef first(url):\n    clients.session.post(url, timeout=5)\n\n\n"
                "def second(url):\n    clients.session.post(url, timeout=5)\n"
            ),
            "app/a_views.py": (
                "from django.db import transaction\n\nfrom app import helpers\n\n\ndef pay(url):\n"
                "    with transaction.atomic():\n        helpers.first(url)\n        helpers.second(url)\n"
            ),
            "app/b_views.py": (
                "from django.db import transaction\n\nfrom app import helpers\n\n\ndef refund(url):\n"
                "    with transaction.atomic():\n        helpers.second(url)\n"
            ),
        }
    )
    assert finding_places(root) == ["app/a_views.py:8:9", "app/a_views.py:9:9", "app/b_views.py:8:9"]
    (root / "app" / "clients.py").write_text("session = object()\n")
    assert finding_places(root) == []
