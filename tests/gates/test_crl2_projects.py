"""CRL2 across modules, through the real command: fixture projects, the jobs report, the cache, `corral fix`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import copy_project, run_corral
from expectations import FIXTURES

PROJECTS = FIXTURES / "crl2_projects"


@pytest.fixture
def copy(tmp_path: Path):
    def make(name: str) -> Path:
        target = tmp_path / name
        copy_project(PROJECTS / name, target)
        return target

    return make


def finding_lines(stdout: str) -> list[str]:
    return [line.split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in stdout.splitlines()[:-1]]


def test_django_celery_reports_each_task_without_a_limit_once(copy) -> None:
    root = copy("django_celery")
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert finding_lines(completed.stdout) == ["mail/tasks.py:4:2: CRL202", "shop/tasks.py:6:2: CRL202"]
    assert "the Celery app at proj/celeryconf.py:7 sets no task_time_limit" in completed.stdout


def test_django_settings_limit_covers_every_shared_task_and_the_cache_notices(copy) -> None:
    root = copy("django_celery")
    assert run_corral("check", cwd=root).returncode == 1  # warms the cache
    settings = root / "proj" / "settings.py"
    settings.write_text(settings.read_text() + "CELERY_TASK_TIME_LIMIT = 5 * 60\n")
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 0, completed.stdout
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert [(kind["kind"], kind["timeout"], kind["source"]) for kind in report] == [
        ("send_receipt", 300.0, "app config"),
        ("recalculate_prices", 300.0, "app config"),
        ("export_catalogue", 120.0, "decorator"),
    ]
    # Unset again: the cached passing results depend on settings.py and must not be served.
    settings.write_text(settings.read_text().replace("CELERY_TASK_TIME_LIMIT = 5 * 60\n", ""))
    assert run_corral("check", cwd=root).returncode == 1


def test_a_second_celery_app_without_a_limit_invalidates_cached_results(copy) -> None:
    root = copy("django_celery")
    settings = root / "proj" / "settings.py"
    settings.write_text(settings.read_text() + "CELERY_TASK_TIME_LIMIT = 60\n")
    assert run_corral("check", cwd=root).returncode == 0
    (root / "proj" / "worker2.py").write_text("from celery import Celery\n\nother = Celery('other')\n")
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    assert "the Celery app at proj/worker2.py:3 sets no task_time_limit" in completed.stdout


def test_constants_and_queues_from_other_modules(copy) -> None:
    root = copy("constants")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["app/jobs.py:20:2: CRL201", "src/svc/actors.py:15:2: CRL204"]
    assert "src/svc/limits.py defines no module-level MISSING" in completed.stdout
    # The queue's timeout lives in app/settings/base.py, two imports away: changing it changes the verdict.
    base = root / "app" / "settings" / "base.py"
    base.write_text(base.read_text().replace('"30"', '"0"'))
    completed = run_corral("check", cwd=root)
    assert "app/jobs.py:7:2: CRL201" in completed.stdout
    queues = root / "app" / "queues.py"
    queues.write_text(
        queues.read_text().replace('Queue("fetch", max_workers=3)', 'Queue("fetch", max_workers=3, timeout=9)')
    )
    completed = run_corral("check", cwd=root)
    assert "app/jobs.py:20:2" not in completed.stdout
    # 10 s HTTP inside the 15 s webhook job passes; 20 s does not.
    assert "CRL210" not in completed.stdout
    settings = root / "app" / "settings" / "base.py"
    settings.write_text(settings.read_text().replace("HTTP_TIMEOUT = 10", "HTTP_TIMEOUT = 20"))
    completed = run_corral("check", cwd=root)
    expected = "app/jobs.py:17:5: CRL210 requests.post timeout 20 s is not shorter than the 15 s timeout of job"
    assert f"{expected} 'webhook.deliver'" in completed.stdout


def test_jobs_static_lists_every_kind(copy) -> None:
    root = copy("constants")
    completed = run_corral("jobs", "--static", cwd=root)
    assert completed.returncode == 0
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["WHERE", "FRAMEWORK", "KIND", "QUEUE", "TIMEOUT", "SOURCE"]
    assert lines[1].split() == ["app/jobs.py:7", "corral", "corpus.index", "index", "30", "s", "queue"]
    assert lines[4].split() == ["app/jobs.py:20", "corral", "jobs.fetch_source", "fetch", "none", "(CRL201)", "-"]
    assert lines[-1] == "7 job kinds, 2 without a provable hard timeout."


def test_check_json_has_the_jobs_section(copy) -> None:
    root = copy("constants")
    document = json.loads(run_corral("check", "--format", "json", cwd=root).stdout)
    first = document["jobs"][0]
    assert first == {
        "path": "app/jobs.py",
        "framework": "corral",
        "kind": "corpus.index",
        "queue": "index",
        "timeout": 30.0,
        "source": "queue",
        "line": 7,
        "function": "corpus_index",
        "code": None,
    }
    assert len(document["jobs"]) == 7


def test_strict_flag_and_config(project) -> None:
    files = {"app/actors.py": "import dramatiq\n\n@dramatiq.actor\ndef crawl(url): ...\n"}
    root = project(files)
    assert run_corral("check", cwd=root).returncode == 0
    completed = run_corral("check", "--strict", cwd=root)
    assert completed.returncode == 1
    assert "app/actors.py:3:2: CRL203 strict mode: declare time_limit explicitly" in completed.stdout
    (root / "pyproject.toml").write_text("[tool.corral]\nstrict = true\n")
    assert run_corral("check", cwd=root).returncode == 1


def test_runtime_jobs_command_is_still_the_runtimes(project) -> None:
    root = project({"a.py": "x = 1\n"})
    completed = run_corral("jobs", "nosuchmodule:runtime", cwd=root)
    assert completed.returncode != 0
    assert "WHERE" not in completed.stdout


def test_fix_adds_limits_preserving_formatting_and_is_idempotent(project) -> None:
    before = (FIXTURES / "crl2_fix" / "before.py").read_text()
    after = (FIXTURES / "crl2_fix" / "after.py").read_text()
    root = project({"pyproject.toml": "[tool.corral]\n", "app/tasks.py": before})
    completed = run_corral("fix", "--add-timeouts", "120", cwd=root)
    assert completed.returncode == 0, completed.stderr
    assert "app/tasks.py: 6 declarations given a limit" in completed.stdout
    assert (root / "app" / "tasks.py").read_text() == after
    assert run_corral("fix", "--add-timeouts", "120", cwd=root).stdout == "Fixed 0 files.\n"
    assert (root / "app" / "tasks.py").read_text() == after
    # What is left is the one declaration only its author can fix: **OPTIONS the gate cannot read.
    completed = run_corral("check", cwd=root)
    assert [line.split(" ")[1] for line in completed.stdout.splitlines()[:-1]] == ["CRL204"]


def test_fix_rejects_a_bad_number(project) -> None:
    root = project({"a.py": "x = 1\n"})
    completed = run_corral("fix", "--add-timeouts", "-3", cwd=root)
    assert completed.returncode == 2
    assert "positive number of seconds" in completed.stderr


def test_rq_job_decorators_wrapped_by_the_project(copy) -> None:
    root = copy("rq_wrappers")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == [
        "shop/domain/relative.py:8:5: CRL210",
        "shop/domain/tasks.py:6:2: CRL203",
        "shop/domain/tasks.py:12:5: CRL210",
        "shop/domain/tasks.py:15:2: CRL203",
    ]
    # Each failure names the chain to RQ's decorator; the preset limit is read where it is defined.
    assert "(through django_rq.job re-exported by shop/jobs.py:5)" in completed.stdout
    assert "(through partial(rq_job, ...) at shop/jobs.py:13)" in completed.stdout
    assert "not shorter than the 30 s timeout of job 'notify'" in completed.stdout
    # The wrapper's module is a dependency of the files using it: a changed preset changes their verdict.
    jobs = root / "shop" / "jobs.py"
    jobs.write_text(jobs.read_text().replace('"bulk", timeout=-1', '"bulk", timeout=60'))
    (root / "shop" / "settings.py").write_text("JOB_TIMEOUT = 90\n")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["shop/domain/tasks.py:6:2: CRL203", "shop/domain/tasks.py:12:5: CRL210"]


def test_celery_apps_built_by_an_imported_factory_are_traced_through_it(copy) -> None:
    root = copy("celery_factory")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["proj/shared.py:4:2: CRL202", "proj/tasks.py:8:2: CRL202"]
    assert "task unlimited has no time_limit and the Celery app at proj/factory.py:11 sets no" in completed.stdout
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert [(kind["kind"], kind["timeout"]) for kind in report] == [
        ("configured_after_the_factory", 15.0),
        ("under_every_app", None),
        ("limited_by_the_factory", 60.0),
        ("unlimited", None),
        ("mail.send", 30.0),
    ]
    # Configured where the factory's app is bound: the shared task runs under each of the three apps.
    worker = root / "proj" / "worker.py"
    worker.write_text(worker.read_text() + "bare.conf.task_time_limit = 5\n")
    assert run_corral("check", cwd=root).returncode == 0
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert ("under_every_app", 5.0) in [(kind["kind"], kind["timeout"]) for kind in report]
    # The factory is a dependency of the tasks' modules: its limit turned off changes their verdict.
    factory = root / "proj" / "factory.py"
    factory.write_text(factory.read_text().replace("task_time_limit = 60", "task_time_limit = None"))
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["proj/shared.py:4:2: CRL202", "proj/tasks.py:4:2: CRL202"]
    assert "the Celery app at proj/factory.py:5 sets task_time_limit=None" in completed.stdout


def test_celery_tasks_declared_through_a_partial_a_factory_or_a_configured_app_task(copy) -> None:
    root = copy("celery_wrappers")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["proj/tasks.py:4:2: CRL202"]
    assert "(through task() returning app.task(...) at proj/tasking.py:8)" in completed.stdout
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert [(kind["kind"], kind["queue"], kind["timeout"]) for kind in report] == [
        ("send_welcome", "emails", None),
        ("build_report", "reports", 30.0),
        ("send_digest", "mail", 20.0),
        ("send_receipt", "mail", 20.0),
        ("refresh", None, 10.0),
    ]
    # The app the wrappers' app.task belongs to is read too: its limit covers the factory's tasks.
    app = root / "proj" / "celery_app.py"
    app.write_text(app.read_text() + "app.conf.task_time_limit = 60\n")
    assert run_corral("check", cwd=root).returncode == 0


def test_django_rq_queues_take_their_default_timeout_from_rq_queues(copy) -> None:
    root = copy("django_rq")
    completed = run_corral("check", cwd=root)
    assert finding_lines(completed.stdout) == ["shop/jobs.py:9:2: CRL203", "shop/jobs.py:23:5: CRL203"]
    assert "queue 'high' in the RQ_QUEUES at shop/settings.py:1: DEFAULT_TIMEOUT=-1 (no limit)" in completed.stdout
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert [(kind["kind"], kind["timeout"], kind["source"]) for kind in report] == [
        ("by_default_queue", 360.0, "queue default_timeout"),
        ("endless", None, None),
        ("limited_on_high", 60.0, "decorator"),
        ("rq_default", 180.0, "framework default"),
        ("by_default_queue", 360.0, "queue default_timeout"),
        ("endless", None, None),
        ("endless", 30.0, "queue default_timeout"),
        ("endless", 45.0, "enqueue"),
    ]
    # The settings module is a dependency: a queue given a limit there passes on the next (cached) run.
    settings = root / "shop" / "settings.py"
    settings.write_text(settings.read_text().replace('"DEFAULT_TIMEOUT": -1', '"DEFAULT_TIMEOUT": 600'))
    assert run_corral("check", cwd=root).returncode == 0
    # A queue's settings in a module-level constant and its name in another module of the project (netbox's
    # shape) are read through; a name from outside the project may be any queue: the limit is unknown.
    (root / "shop" / "constants.py").write_text('DEFAULT = "default"\n')
    settings.write_text(
        "from shop.constants import DEFAULT\n"
        'PARAMS = {"HOST": "localhost", "DEFAULT_TIMEOUT": 240}\n'
        'RQ_QUEUES = {DEFAULT: PARAMS, "high": {"DEFAULT_TIMEOUT": 600}, "low": PARAMS}\n'
    )
    assert run_corral("check", cwd=root).returncode == 0
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    assert ("by_default_queue", 240.0, "queue default_timeout") in [
        (kind["kind"], kind["timeout"], kind["source"]) for kind in report
    ]
    settings.write_text(settings.read_text().replace("from shop.constants", "from vendored.constants"))
    completed = run_corral("check", cwd=root)
    assert "shop/jobs.py:5:2: CRL204" in finding_lines(completed.stdout)
    assert (
        "a key of RQ_QUEUES may be queue 'default': vendored.constants.DEFAULT is not defined in a module of"
        in completed.stdout
    )


def test_a_decorator_reexported_by_assignment_declares_the_kinds_it_names(copy) -> None:
    root = copy("reexported_jobs")
    report = json.loads(run_corral("jobs", "--static", "--format", "json", cwd=root).stdout)["jobs"]
    # `job = rq_job` and `partial(rq_job, ...)` declare RQ kinds; `job = <a decorator of an unknown module>` none.
    assert [(kind["kind"], kind["queue"], kind["timeout"]) for kind in report] == [
        ("fetch", "q", 20.0),
        ("fetch_bounded", "q", 20.0),
        ("send", "mail", 30.0),
    ]


def test_an_enqueue_through_a_wrapper_follows_the_module_that_wraps_the_decorator(copy) -> None:
    root = copy("reexported_jobs")
    warm = finding_lines(run_corral("check", cwd=root).stdout)
    assert "shop/views.py:10:9: CRL402" in warm
    jobs = root / "shop" / "jobs.py"
    original = jobs.read_text()
    # mail_job wraps no job decorator any more: the cached verdict of views.py, which never names jobs.py, must go.
    jobs.write_text(original.replace('mail_job = partial(rq_job, "mail", timeout=30)', "mail_job = print"))
    assert "shop/views.py:10:9: CRL402" not in finding_lines(run_corral("check", cwd=root).stdout)
    jobs.write_text(original)
    assert finding_lines(run_corral("check", cwd=root).stdout) == warm
