"""CRL3: Celery's worker children against the database when Django keeps their connections open, through
the real `corral check`: concurrency x processes against `max-conns` x `reserve`, only when all are declared."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_budget, run_corral

SETTINGS = """
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "CONN_MAX_AGE": 600,
        }
    }
    CELERY_WORKER_CONCURRENCY = 8
"""
# 40 x 0.5 = 20 connections for the workers.
CONFIG = "[tool.corral]\nmax-conns = 40\n"
COMPOSE = """
    services:
      celery:
        image: shop
        command: celery -A shop worker -l info
        deploy:
          replicas: 3
      beat:
        image: shop
        command: celery -A shop beat
        deploy:
          replicas: 50
"""


@pytest.fixture
def project(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, str]], Path]:
    def make(files: dict[str, str]) -> Path:
        root = tmp_path_factory.mktemp("project")
        for relpath, source in files.items():
            (root / relpath).parent.mkdir(parents=True, exist_ok=True)
            (root / relpath).write_text(textwrap.dedent(source).lstrip("\n"))
        return root

    return make


def check(project: Any, files: dict[str, str]) -> tuple[int, list[str], list[dict[str, Any]]]:
    root = project({"pyproject.toml": CONFIG, "shop/__init__.py": "", **files})
    return run_budget(root)


def test_concurrency_times_replicas_over_the_share_is_crl301_on_the_persistent_setting(project) -> None:
    code, found, (entry,) = check(project, {"shop/settings.py": SETTINGS, "compose.yml": COMPOSE})
    assert code == 1
    (finding,) = found
    assert finding.startswith("shop/settings.py:4:25 CRL301 Celery workers could hold more database connections")
    assert "concurrency 8 x processes 3 = 24 > 20 (max_conns 40 x reserve 0.5)" in finding
    assert "CONN_MAX_AGE 600 s" in finding
    assert "concurrency 8 from worker_concurrency at shop/settings.py:7" in finding
    assert "processes 3 from compose.yml:6 (service celery, deploy.replicas)" in finding
    assert (entry["kind"], entry["total"], entry["limit"], entry["ok"]) == ("celery", 24, 20, False)
    # Six children in each of three replicas fit; celery beat's fifty replicas never counted.
    fits = SETTINGS.replace("= 8", "= 6")
    code, found, (entry,) = check(project, {"shop/settings.py": fits, "compose.yml": COMPOSE})
    assert (code, found, entry["total"], entry["ok"]) == (0, [], 18, True)


def test_connections_not_kept_or_no_database_limit_are_not_checked(project) -> None:
    for settings, config in (
        (SETTINGS.replace("600", "0"), CONFIG),  # closed after each request or task: not bounded statically
        (
            "import os\n" + textwrap.dedent(SETTINGS).replace("600", "0").replace("= 8", "= int(os.environ['C'])"),
            CONFIG,
        ),
        (SETTINGS.replace('"CONN_MAX_AGE": 600,', ""), CONFIG),  # Django's default, 0
        (SETTINGS, "[tool.corral]\n"),  # no max-conns: nothing to check against
    ):
        root = project({"pyproject.toml": config, "shop/settings.py": settings, "compose.yml": COMPOSE})
        completed = run_corral("check", "--format", "json", cwd=root)
        assert completed.returncode == 0, completed.stdout
        assert json.loads(completed.stdout)["budget"] == []


def test_the_concurrency_on_the_worker_command_wins_and_every_worker_adds_its_term(project) -> None:
    compose = """
        services:
          fast:
            command: ["celery", "-A", "shop", "worker", "--concurrency=2", "-Q", "fast"]
            scale: 4
          solo:
            command: python -m celery -A shop worker --pool solo
          slow:
            command: celery -A shop worker -c 3 -Q slow
    """
    code, found, (entry,) = check(project, {"shop/settings.py": SETTINGS, "compose.yml": compose})
    assert (code, found) == (0, [])
    assert entry["arithmetic"] == (
        "concurrency 2 x processes 4 + concurrency 3 x processes 1 + concurrency 1 x processes 1 = 12 <= 20"
        " (max_conns 40 x reserve 0.5)"
    )
    assert "concurrency 2 from --concurrency on its command" in entry["sources"][0]


def test_kubernetes_celery_deployments_count_too(project) -> None:
    manifest = """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: celery}
        spec:
          replicas: 5
          template:
            spec:
              containers:
                - name: worker
                  command: [celery]
                  args: [-A, shop, worker, -c, "4"]
    """
    config = CONFIG + 'kubernetes-manifests = ["k8s"]\n'
    root = project({"pyproject.toml": config, "shop/settings.py": SETTINGS, "k8s/celery.yaml": manifest})
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 0, completed.stdout
    assert "concurrency 4 x processes 5 = 20 <= 20" in completed.stdout
    assert "processes 5 from k8s/celery.yaml:5 (Deployment celery, container worker, spec.replicas)" in completed.stdout
    manifest = manifest.replace("replicas: 5", "replicas: 6")
    root = project({"pyproject.toml": config, "shop/settings.py": SETTINGS, "k8s/celery.yaml": manifest})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert "concurrency 4 x processes 6 = 24 > 20" in completed.stdout


def test_settings_spellings(project) -> None:
    celery_app = """
        from celery import Celery

        app = Celery("shop")
        app.conf.update(worker_concurrency=12, task_acks_late=True)
    """
    settings = """
        import dj_database_url

        DATABASES = {"default": dj_database_url.config(conn_max_age=60)}
    """
    code, found, (entry,) = check(project, {"shop/celery.py": celery_app, "shop/settings.py": settings})
    assert (code, found) == (0, [])
    assert entry["arithmetic"].startswith("concurrency 12 x processes 1 = 12 <= 20")
    assert entry["terms"][0]["processes_from"] == "(no deployment file runs celery worker)"
    celery_app = "from celery import Celery\napp = Celery('shop')\napp.conf.worker_concurrency = 30\n"
    settings = "DATABASES = {'default': {}}\nDATABASES['default']['CONN_MAX_AGE'] = None\n"
    code, found, (entry,) = check(project, {"shop/celery.py": celery_app, "shop/settings.py": settings})
    (finding,) = found
    assert finding.startswith("shop/settings.py:2:40 CRL301 ") and "= 30 > 20" in finding
    assert "CONN_MAX_AGE for ever" in finding


def test_look_alikes_are_not_celery_settings(project) -> None:
    files = {
        "shop/settings.py": SETTINGS.replace("CELERY_WORKER_CONCURRENCY", "WORKER_CONCURRENCY"),
        "shop/pool.py": "def configure(app):\n    app.conf.worker_concurrency = 99\nworker_concurrency = 99\n",
    }
    code, found, budget = check(project, files)
    assert (code, found, budget) == (0, [], [])


def test_what_cannot_be_counted_is_crl302(project) -> None:
    no_concurrency = SETTINGS.replace("CELERY_WORKER_CONCURRENCY = 8\n", "")
    _, found, (entry,) = check(project, {"shop/settings.py": no_concurrency, "compose.yml": COMPOSE})
    (finding,) = found
    assert finding.startswith(
        "compose.yml:6:1 CRL302 the celery worker here (service celery, deploy.replicas) has no --concurrency and no "
        "worker_concurrency"
    )
    assert "Celery's default is the host's CPU count" in finding
    assert entry["ok"] is None
    substituted = COMPOSE.replace("worker -l info", "worker -l info -c ${CONCURRENCY}")
    _, found, _ = check(project, {"shop/settings.py": SETTINGS, "compose.yml": substituted})
    (finding,) = found
    assert finding.startswith("compose.yml:4:1 CRL302 ")  # the command's line
    assert "--concurrency '${CONCURRENCY}', filled in at deploy time" in finding
    from_environment = "import os\n" + textwrap.dedent(SETTINGS).replace("600", 'int(os.environ["CONN_MAX_AGE"])')
    _, found, _ = check(project, {"shop/settings.py": from_environment, "compose.yml": COMPOSE})
    (finding,) = found
    assert finding.startswith("shop/settings.py:6:1 CRL302 CONN_MAX_AGE: ") and "environment" in finding
    for bad in ("0", "2.5", "None"):
        _, found, _ = check(project, {"shop/settings.py": SETTINGS.replace("= 8", f"= {bad}"), "compose.yml": COMPOSE})
        (finding,) = found
        assert finding.startswith(
            f"shop/settings.py:7:1 CRL302 worker_concurrency must be a whole number >= 1, got {bad}"
        )
    disagreeing = {
        "shop/settings/__init__.py": "",
        "shop/settings/base.py": SETTINGS,
        "shop/settings/production.py": SETTINGS.replace("= 8", "= 4"),
    }
    _, found, _ = check(project, {**disagreeing, "compose.yml": COMPOSE})
    (finding,) = found
    assert "settings modules disagree on worker_concurrency (8 at shop/settings/base.py:7, 4 at" in finding


def test_a_changed_compose_file_is_seen_by_the_next_cached_run(project) -> None:
    root = project({"pyproject.toml": CONFIG, "shop/settings.py": SETTINGS, "compose.yml": COMPOSE})
    assert run_corral("check", cwd=root).returncode == 1
    assert run_corral("check", cwd=root).returncode == 1
    (root / "compose.yml").write_text(textwrap.dedent(COMPOSE).replace("replicas: 3", "replicas: 2"))
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 0, completed.stdout
    assert "concurrency 8 x processes 2 = 16 <= 20" in completed.stdout


def test_an_unreadable_settings_concurrency_matters_only_to_a_worker_that_takes_it(project) -> None:
    # Celery's command line overrides the setting: with every worker's concurrency on its command
    # (`--concurrency=10`, `-P solo`), the settings' unreadable value is never used.
    from_environment = "import os\n" + textwrap.dedent(SETTINGS).replace(
        "= 8", '= os.environ.get("CELERY_WORKER_CONCURRENCY")'
    )
    commanded = COMPOSE.replace("worker -l info", "worker --concurrency=10 -l info")
    _, found, (entry,) = check(project, {"shop/settings.py": from_environment, "compose.yml": commanded})
    (finding,) = found  # the budget is counted: over it, not unproven
    assert finding.startswith("shop/settings.py:6:25 CRL301 ") and "concurrency 10 x processes 3 = 30 > 20" in finding
    solo = COMPOSE.replace("worker -l info", "worker -P solo")
    code, found, (entry,) = check(project, {"shop/settings.py": from_environment, "compose.yml": solo})
    assert (code, found) == (0, [])
    assert entry["arithmetic"].startswith("concurrency 1 x processes 3 = 3 <= 20")
    # A second worker with no concurrency on its command takes the settings' value: it cannot be read.
    mixed = textwrap.dedent(solo) + "  default:\n    image: shop\n    command: celery -A shop worker -Q default\n"
    _, found, (entry,) = check(project, {"shop/settings.py": from_environment, "compose.yml": mixed})
    (finding,) = found
    assert finding.startswith("shop/settings.py:9:1 CRL302 worker_concurrency: os.environ.get(")
    assert entry["ok"] is None


def test_a_compose_file_that_is_not_yaml_is_crl302_without_a_runtime_too(project) -> None:
    no_concurrency = SETTINGS.replace("CELERY_WORKER_CONCURRENCY = 8\n", "")
    broken = "services:\n  celery:\n    command: [celery -A shop worker -c 30\n"
    _, found, (entry,) = check(project, {"shop/settings.py": no_concurrency, "docker-compose.yml": broken})
    (finding,) = found
    assert finding.startswith("docker-compose.yml:") and " CRL302 is not valid YAML" in finding, finding
    assert entry["ok"] is None
    fixed = broken.replace("[celery -A shop worker -c 30", "celery -A shop worker -c 30")
    _, found, (entry,) = check(project, {"shop/settings.py": no_concurrency, "docker-compose.yml": fixed})
    assert [line.split(" CRL")[1][:3] for line in found] == ["301"]
    assert "concurrency 30 x processes 1 = 30 > 20" in found[0]
