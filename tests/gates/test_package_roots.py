"""A service whose packages sit below the repository's top (`apps/api/proj/`, beside `apps/api/manage.py`) and
has no configuration of its own: checked from the top, its imports resolve, and its modules are named, as the
service running in `apps/api` sees them, so the findings are those of a run from that folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import git_init, run_corral, run_flake8_crl

FIXTURES = Path(__file__).parent.parent / "fixtures"

CELERY_SERVICE = {
    "apps/api/manage.py": 'import os\n\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")\n',
    "apps/api/proj/__init__.py": "",
    "apps/api/proj/celery.py": (
        "import os\n\nfrom celery import Celery\n\n"
        'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")\n'
        'app = Celery("proj")\napp.config_from_object("django.conf:settings", namespace="CELERY")\n'
    ),
    "apps/api/proj/settings.py": "CELERY_TASK_TIME_LIMIT = 300\nTASK_LIMIT = 120\n",
    "apps/api/proj/tasks.py": (
        "from celery import shared_task\n\nfrom proj.settings import TASK_LIMIT\n\n\n"
        "@shared_task\ndef plain():\n    return 1\n\n\n"
        "@shared_task(time_limit=TASK_LIMIT)\ndef limited():\n    return 2\n"
    ),
    "web/app.py": "x = 1\n",
}


def findings(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if ": CRL" in line]


@pytest.fixture
def service(project) -> Path:
    return git_init(project(CELERY_SERVICE)).resolve()


def test_a_service_below_the_top_reads_its_settings_from_its_own_packages(service: Path) -> None:
    # The app's task_time_limit (through DJANGO_SETTINGS_MODULE) and `from proj.settings import ...` both
    # resolve in apps/api: no CRL204 "not defined", from the top as from the service's own folder.
    for cwd in (service, service / "apps/api"):
        completed = run_corral("check", cwd=cwd)
        assert (completed.returncode, findings(completed.stdout)) == (0, []), completed.stdout + completed.stderr
    flake8 = run_flake8_crl("apps/api/proj/tasks.py", cwd=service)
    assert (flake8.returncode, flake8.stdout) == (0, ""), flake8.stdout + flake8.stderr


def test_a_module_found_only_under_another_service_is_named_where_it_is_reported(service: Path) -> None:
    (service / "web/jobs.py").write_text(
        "from celery import shared_task\n\nfrom proj.settings import TASK_LIMIT\n\n\n"
        "@shared_task(time_limit=TASK_LIMIT)\ndef elsewhere():\n    return 3\n"
    )
    completed = run_corral("check", cwd=service)
    (line,) = findings(completed.stdout)
    assert line.startswith("web/jobs.py:6:2: CRL204 time_limit proj.settings.TASK_LIMIT cannot be resolved")
    assert "apps/api/proj/settings.py would hold it" in line
    assert "not defined" not in line


def test_the_cache_follows_the_init_files_that_decide_a_modules_name(service: Path) -> None:
    assert findings(run_corral("check", cwd=service).stdout) == []
    # An `__init__.py` in apps/api makes `apps.api.proj` the package: `proj.settings` no longer resolves.
    (service / "apps/api/__init__.py").write_text("")
    changed = findings(run_corral("check", cwd=service).stdout)
    assert [line.split(" ", 2)[:2] for line in changed] == [
        ["apps/api/proj/tasks.py:6:2:", "CRL204"],
        ["apps/api/proj/tasks.py:11:2:", "CRL204"],
    ], changed
    (service / "apps/api/__init__.py").unlink()
    assert findings(run_corral("check", cwd=service).stdout) == []


def test_signals_sent_and_connected_in_a_service_below_the_top_are_matched(tmp_path: Path) -> None:
    # A receiver is matched to its signal by the signal's qualified name: `app.signals.order_paid` wherever
    # the service sits, as `from app.signals import order_paid` names it.
    shutil.copytree(FIXTURES / "crl4_projects/signals", tmp_path / "services/shop")
    git_init(tmp_path)
    inside = findings(run_corral("check", "--select", "CRL4", cwd=tmp_path / "services/shop").stdout)
    assert any("CRL401" in line or "CRL402" in line for line in inside), inside
    from_top = findings(run_corral("check", "--select", "CRL4", cwd=tmp_path).stdout)
    # The same findings and chains, their paths relative to where corral ran.
    assert [line.replace("services/shop/", "") for line in from_top] == inside


@pytest.mark.parametrize("is_package", [False, True])
def test_a_module_named_by_a_script_is_looked_for_beside_it_and_depends_on_that_folder_s_init(
    project, is_package: bool
) -> None:
    from corral.gates.analysis.modules import ProjectModules, forget

    files = {"svc/manage.py": "", "svc/proj/__init__.py": "", "svc/proj/settings.py": "X = 1\n", "jobs/a.py": ""}
    root = project({**files, **({"svc/__init__.py": ""} if is_package else {})}).resolve()
    forget()
    dependencies: dict[str, tuple[int, int, str]] = {}
    found = ProjectModules(root, "jobs/a.py", dependencies).module("proj.settings", near="svc/manage.py")
    # A script's folder is first on its import path; a package's folder is not (it is imported from above).
    assert (found is not None) is not is_package
    assert dependencies["*exists:svc/__init__.py"] == (0, 0, "1" if is_package else "0")
