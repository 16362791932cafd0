"""CRL3: the processes of a runtime counted from the deployment files (compose, Kubernetes manifests,
gunicorn.conf.py), through the real `corral check`: read, never executed; what cannot be read is CRL302."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_corral

# 4 workers + relay 1 = 5 connections a process, against 40 x 0.5 = 20: four processes fit, five do not.
RUNTIME = {
    "app/__init__.py": "",
    "app/runtime.py": """
        from corral.runtime import Queue, Runtime

        index = Queue("index", max_workers=4, timeout=30)
        runtime = Runtime(queues=[index], store="sqlite://", max_conns=40)
    """,
}


@pytest.fixture
def project(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, str]], Path]:
    """Write a small project (relative path -> source) in a folder of its own for each call."""

    def make(files: dict[str, str]) -> Path:
        root = tmp_path_factory.mktemp("project")
        for relpath, source in files.items():
            (root / relpath).parent.mkdir(parents=True, exist_ok=True)
            (root / relpath).write_text(textwrap.dedent(source).lstrip("\n"))
        return root

    return make


def check(project: Any, files: dict[str, str], config: str = "") -> tuple[int, list[str], dict[str, Any]]:
    root = project({"pyproject.toml": "[tool.corral]\n" + config, **RUNTIME, **files})
    completed = run_corral("check", "--format", "json", cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    document = json.loads(completed.stdout)
    found = [f"{f['path']}:{f['line']} {f['code']} {f['message']}" for f in document["findings"]]
    (budget,) = document["budget"]
    return completed.returncode, found, budget


def test_compose_deploy_replicas_of_the_worker_service_multiply_the_budget(project) -> None:
    compose = """
        services:
          web:
            image: shop
            command: gunicorn shop.wsgi
            deploy:
              replicas: 12
          worker:
            image: shop
            command: ["corral", "worker", "app.runtime:runtime"]
            deploy:
              replicas: 5
    """
    code, found, budget = check(project, {"docker-compose.yml": compose})
    assert code == 1
    (finding,) = found
    assert finding.startswith("app/runtime.py:4 CRL301 ")
    assert "(index 4 + relay 1) x processes 5 = 25 > 20" in finding
    assert "processes 5 from docker-compose.yml:11 (service worker, deploy.replicas)" in finding
    assert budget["processes"] == 5
    assert budget["sources"]["processes"] == "processes 5 from docker-compose.yml:11 (service worker, deploy.replicas)"
    # Four replicas fit; the web service's twelve never counted.
    code, found, budget = check(project, {"docker-compose.yml": compose.replace("replicas: 5", "replicas: 4")})
    assert (code, found, budget["total"]) == (0, [], 20)


def test_compose_spellings_of_the_worker_command_and_its_count(project) -> None:
    compose = """
        x-app: &app
          image: shop
          entrypoint: ["sh", "-c"]
          command: ["exec corral worker app.runtime:runtime --queues index"]
        services:
          jobs:
            <<: *app
            scale: 3
          mail:
            image: shop
            command: /venv/bin/corral worker app.runtime:runtime
          legacy:
            image: shop
            command: python -m corral.runtime.cli worker app.runtime:runtime
            deploy: {replicas: 1}
          lookalike:
            image: shop
            command: corral check .
            deploy: {replicas: 50}
    """
    code, _, budget = check(project, {"compose.yaml": compose})
    assert code == 1
    assert budget["processes"] == 5
    origin = budget["sources"]["processes"]
    assert origin.startswith("processes 5 = 3 from compose.yaml:8 (service jobs, scale) + ")
    assert "1 from compose.yaml:15 (service legacy, deploy.replicas)" in origin
    assert "1 from compose.yaml:11 (service mail, no deploy.replicas: Compose runs one)" in origin
    assert "lookalike" not in origin


def test_the_override_file_merges_over_the_compose_file(project) -> None:
    compose = "services:\n  worker:\n    command: corral worker app.runtime:runtime\n    deploy:\n      replicas: 2\n"
    override = "services:\n  worker:\n    deploy:\n      replicas: 6\n"
    code, _, budget = check(project, {"compose.yml": compose, "compose.override.yml": override})
    assert code == 1
    assert budget["sources"]["processes"] == "processes 6 from compose.override.yml:4 (service worker, deploy.replicas)"
    # Compose reads compose.yaml first: docker-compose.yml beside it is not the project's file.
    code, _, budget = check(project, {"compose.yaml": compose, "docker-compose.yml": compose.replace("2", "9")})
    assert (code, budget["processes"]) == (0, 2)


def test_counts_the_gate_cannot_read_are_crl302_with_file_line_and_reason(project) -> None:
    worker = "  worker:\n    command: corral worker app.runtime:runtime\n"
    cases = {
        "    deploy:\n      replicas: ${REPLICAS}\n": (5, "deploy.replicas is '${REPLICAS}', filled in at deploy time"),
        "    deploy:\n      replicas: three\n": (5, "deploy.replicas is 'three', not a whole number"),
        "    deploy:\n      replicas: 2.5\n": (5, "'2.5', not a whole number"),
        "    deploy:\n      mode: global\n": (5, "deploy.mode global: one per node"),
        "    scale: 2\n    deploy:\n      replicas: 3\n": (6, "deploy.replicas 3 but scale 2"),
    }
    for body, (line, reason) in cases.items():
        code, found, budget = check(project, {"docker-compose.yml": "services:\n" + worker + body})
        assert code == 1, body
        (finding,) = found
        assert finding.startswith(f"docker-compose.yml:{line} CRL302 service worker "), finding
        assert reason in finding, finding
        assert "the processes of the runtime at app/runtime.py:4 cannot be counted" in finding
        assert budget["ok"] is None
    code, found, _ = check(project, {"docker-compose.yml": "services:\n  worker: [unclosed\n"})
    (finding,) = found
    assert finding.startswith("docker-compose.yml:3 CRL302 is not valid YAML")


def test_an_unreadable_count_of_a_service_not_running_the_worker_is_no_finding(project) -> None:
    compose = "services:\n  web:\n    command: gunicorn app\n    deploy:\n      replicas: ${WEB_REPLICAS}\n"
    assert check(project, {"docker-compose.yml": compose})[:2] == (0, [])


KUBERNETES = """
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings}
    data: {REPLICAS: "9"}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: jobs
    spec:
      replicas: 3
      template:
        spec:
          containers:
            - name: worker
              image: shop
              command: ["corral"]
              args: ["worker", "app.runtime:runtime"]
            - name: sidecar
              image: proxy
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      replicas: 20
      template:
        spec:
          containers:
            - {name: web, image: shop, command: [gunicorn, shop.wsgi]}
"""


def test_kubernetes_deployment_replicas_from_the_configured_manifest_folder(project) -> None:
    config = 'kubernetes-manifests = ["deploy/k8s"]\n'
    code, found, budget = check(project, {"deploy/k8s/jobs.yaml": KUBERNETES}, config)
    assert (code, found, budget["processes"]) == (0, [], 3)
    assert budget["sources"]["processes"] == (
        "processes 3 from deploy/k8s/jobs.yaml:11 (Deployment jobs, container worker, spec.replicas)"
    )
    # Summed with the compose file's worker service: 3 + 2 = 5 processes do not fit.
    compose = "services:\n  worker:\n    command: corral worker app.runtime:runtime\n    scale: 2\n"
    code, found, budget = check(project, {"deploy/k8s/jobs.yaml": KUBERNETES, "compose.yml": compose}, config)
    assert code == 1 and budget["processes"] == 5
    # A folder the config does not name is not read.
    assert check(project, {"deploy/k8s/jobs.yaml": KUBERNETES.replace("replicas: 3", "replicas: 30")})[:2] == (0, [])


def test_kubernetes_counts_the_gate_cannot_read(project) -> None:
    config = 'kubernetes-manifests = ["k8s"]\n'
    templated = KUBERNETES.replace("replicas: 3", "replicas: ${JOBS_REPLICAS}")
    _, found, _ = check(project, {"k8s/jobs.yml": templated}, config)
    (finding,) = found
    assert finding.startswith("k8s/jobs.yml:11 CRL302 Deployment jobs, container worker runs corral worker")
    assert "'${JOBS_REPLICAS}', filled in at deploy time" in finding
    daemon = KUBERNETES.replace("kind: Deployment", "kind: DaemonSet", 1)
    _, found, _ = check(project, {"k8s/jobs.yml": daemon}, config)
    (finding,) = found
    assert "DaemonSet jobs, container worker runs corral worker" in finding
    _, found, _ = check(project, {"k8s/broken.yaml": "kind: Deployment\nspec: {replicas: 3\n"}, config)
    (finding,) = found
    assert finding.startswith("k8s/broken.yaml:") and "is not valid YAML" in finding


def test_gunicorn_workers_count_when_no_worker_command_runs_the_runtime(project) -> None:
    code, found, budget = check(project, {"gunicorn.conf.py": "bind = '0.0.0.0:8000'\nworkers = 5\n"})
    assert code == 1
    assert budget["sources"]["processes"].startswith("processes 5 from gunicorn.conf.py:2 (gunicorn workers;")
    assert check(project, {"gunicorn.conf.py": "workers = 4\n"})[:2] == (0, [])
    computed = "import multiprocessing\nworkers = multiprocessing.cpu_count() * 2 + 1\n"
    code, found, _ = check(project, {"gunicorn.conf.py": computed})
    (finding,) = found
    assert finding.startswith("gunicorn.conf.py:2 CRL302 workers = multiprocessing.cpu_count() * 2 + 1 is not")
    # A worker service runs the runtime: the web server's processes do not, whatever its config says.
    compose = "services:\n  worker:\n    command: corral worker app.runtime:runtime\n"
    code, found, budget = check(project, {"gunicorn.conf.py": computed, "compose.yml": compose})
    assert (code, found, budget["processes"]) == (0, [], 1)


def test_configured_processes_win_over_the_deployment_files(project) -> None:
    compose = "services:\n  worker:\n    command: corral worker app.runtime:runtime\n    scale: ${N}\n"
    code, found, budget = check(project, {"compose.yml": compose}, "processes = 2\n")
    assert (code, found, budget["processes"]) == (0, [], 2)
    assert (
        budget["sources"]["processes"]
        == "processes 2 from [tool.corral] processes (set: wins over the deployment files)"
    )


def test_without_deployment_files_one_process_and_the_table_says_so(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", **RUNTIME})
    completed = run_corral("check", "--budget", cwd=root)
    assert completed.returncode == 0, completed.stdout
    assert "processes 1 (no deployment file declares how many run this runtime)" in completed.stdout
    assert "max_conns 40 from app/runtime.py:4" in completed.stdout


def test_with_several_runtimes_a_worker_command_counts_for_the_runtime_it_names(project) -> None:
    files = {
        "app/other.py": """
            from corral.runtime import Queue, Runtime

            crawl = Queue("crawl", max_workers=1, timeout=60)
            runtime = Runtime(queues=[crawl], store="sqlite://", max_conns=40)
        """,
        "compose.yml": """
            services:
              crawler:
                command: corral worker app.other:runtime
                deploy: {replicas: 9}
              jobs:
                command: corral worker app.runtime:runtime
                deploy: {replicas: 2}
        """,
    }
    root = project({"pyproject.toml": "[tool.corral]\n", **RUNTIME, **files})
    document = json.loads(run_corral("check", "--format", "json", cwd=root).stdout)
    processes = {entry["path"]: entry["processes"] for entry in document["budget"]}
    assert processes == {"app/other.py": 9, "app/runtime.py": 2}
    assert document["findings"] == []
    (root / "compose.yml").write_text("services:\n  jobs:\n    command: corral worker app.jobs:runtime\n")
    document = json.loads(run_corral("check", "--format", "json", cwd=root).stdout)
    unnamed = [
        f for f in document["findings"] if "names none of the modules declaring the project's runtimes" in f["message"]
    ]
    assert {f["code"] for f in unnamed} == {"CRL302"} and len(unnamed) == 2  # one for each runtime


def test_a_cached_result_is_not_served_once_a_deployment_file_changes(project) -> None:
    """The project checks' output is cached with its inputs: the deployment files are among them, whether
    edited, created after the run, or added to a manifest folder."""
    root = project({"pyproject.toml": '[tool.corral]\nkubernetes-manifests = ["k8s"]\n', "k8s/.keep": "", **RUNTIME})

    def budget() -> tuple[int, int | None]:
        completed = run_corral("check", "--format", "json", cwd=root)
        (entry,) = json.loads(completed.stdout)["budget"]
        return completed.returncode, entry.get("processes")

    assert budget() == (0, 1)
    assert budget() == (0, 1)  # warm: served from the cache
    compose = root / "compose.yml"
    compose.write_text("services:\n  worker:\n    command: corral worker app.runtime:runtime\n    scale: 4\n")
    assert budget() == (0, 4)
    compose.write_text(compose.read_text().replace("scale: 4", "scale: 5"))
    assert budget() == (1, 5)
    manifest = Path(root, "k8s", "jobs.yaml")
    manifest.write_text(textwrap.dedent(KUBERNETES))
    assert budget() == (1, 8)
    compose.unlink()
    assert budget() == (0, 3)


def test_manifest_folders_must_stay_below_the_root(project) -> None:
    for folders in ('["../deploy"]', '["/etc/k8s"]', '"deploy/k8s"', "[1]"):
        root = project({"pyproject.toml": f"[tool.corral]\nkubernetes-manifests = {folders}\n", **RUNTIME})
        completed = run_corral("check", cwd=root)
        assert completed.returncode == 2, folders
        assert "kubernetes-manifests" in completed.stderr + completed.stdout


def test_bad_deployment_files_are_crl302_never_a_traceback(project) -> None:
    config = 'kubernetes-manifests = ["k8s"]\n'
    recursive = "services:\n  w: &w\n    command: [corral, worker]\n    <<: *w\n    deploy:\n      <<: *w\n"
    assert check(project, {"compose.yml": recursive})[:2] == (0, [])
    cases = {
        "compose.yml": (
            b"a: " + b"[" * 3000 + b"]" * 3000 + b"\n",
            "compose.yml:1 CRL302 is nested too deeply to read",
        ),
        "k8s/jobs.yaml": (b"kind: \xff\n", "k8s/jobs.yaml:1 CRL302 cannot be read: "),
        "docker-compose.yml": (
            b"services:\n  w:\n    command: corral worker\n    scale: " + b"9" * 5000 + b"\n",
            "docker-compose.yml:4 CRL302 service w runs corral worker and its scale is '99999",
        ),
    }
    for name, (data, expected) in cases.items():
        root = project({"pyproject.toml": "[tool.corral]\n" + config, "k8s/.keep": "", **RUNTIME})
        (root / name).write_bytes(data)
        completed = run_corral("check", "--format", "json", cwd=root)
        (finding,) = [
            f"{f['path']}:{f['line']} {f['code']} {f['message']}" for f in json.loads(completed.stdout)["findings"]
        ]
        assert completed.returncode == 1 and finding.startswith(expected), finding
    root = project({"pyproject.toml": '[tool.corral]\nkubernetes-manifests = ["deploy/k8s"]\n', **RUNTIME})
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert "deploy/k8s:1:1: CRL302 is named by kubernetes-manifests but is no folder" in completed.stdout


def test_an_autoscaler_counts_up_to_its_max_replicas(project) -> None:
    autoscaler = """
        apiVersion: autoscaling/v2
        kind: HorizontalPodAutoscaler
        metadata: {name: jobs-scaler}
        spec:
          scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: jobs}
          minReplicas: 1
          maxReplicas: 6
    """
    config = 'kubernetes-manifests = ["k8s"]\n'
    files = {"k8s/jobs.yaml": KUBERNETES, "k8s/hpa.yaml": autoscaler}
    code, found, budget = check(project, files, config)
    assert code == 1 and budget["processes"] == 6
    assert budget["sources"]["processes"] == (
        "processes 6 from k8s/hpa.yaml:7 (Deployment jobs, container worker, HorizontalPodAutoscaler jobs-scaler"
        " maxReplicas)"
    )
    # An autoscaler of another Deployment changes nothing; one whose maximum is templated is CRL302.
    code, found, budget = check(
        project, {**files, "k8s/hpa.yaml": autoscaler.replace("name: jobs}", "name: web}")}, config
    )
    assert (code, found, budget["processes"]) == (0, [], 3)
    templated = autoscaler.replace("maxReplicas: 6", "maxReplicas: ${MAX}")
    _, found, _ = check(project, {**files, "k8s/hpa.yaml": templated}, config)
    (finding,) = found
    assert finding.startswith("k8s/hpa.yaml:7 CRL302 Deployment jobs, container worker runs corral worker;")
    assert "maxReplicas is '${MAX}', filled in at deploy time" in finding


def test_a_manifest_folder_that_cannot_be_listed_is_crl302_and_not_cached(tmp_path, monkeypatch) -> None:
    """(Run as root, a folder's permissions do not stop a listing: the failure is simulated.)"""
    import os

    from corral.gates.source.deployments import deployment_inputs, read_deployments

    (tmp_path / "k8s" / "private").mkdir(parents=True)
    (tmp_path / "k8s" / "jobs.yaml").write_text(textwrap.dedent(KUBERNETES))
    scandir = os.scandir

    def refusing(path: Any) -> Any:
        if str(path).endswith("private"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    deployments = read_deployments(tmp_path, ("k8s",))
    assert [(value.path, value.reason) for value in deployments.unreadable] == [
        ("k8s/private", "cannot be listed: Permission denied")
    ]
    assert [worker.processes for worker in deployments.workers] == [3]
    assert ("k8s/private/", None) in deployment_inputs(tmp_path, ("k8s",))
