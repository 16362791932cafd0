"""CRL2 fixture files: exempt paths, strict mode (each fixture's `strict` variant), messages, the prefilter."""

from __future__ import annotations

from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.frameworks import FRAMEWORKS
from corral.gates.frameworks.base import DEFAULT
from expectations import FIXTURES, assert_matches, example_source, read_expectations

FIXTURE_FILES = sorted((FIXTURES / "crl2").glob("*.py"))
CONFIG = Config(root=Path("/project"))


def codes(source: str, config: Config = CONFIG) -> set[tuple[int, str]]:
    result = check_source("app/module.py", example_source(source).encode(), config)
    return {(finding.line, finding.code) for finding in result.findings}


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda path: path.stem)
def test_infra_and_tests_are_exempt(fixture: Path) -> None:
    for relpath in (f"app/infra/{fixture.name}", f"tests/{fixture.name}"):
        assert check_source(relpath, fixture.read_bytes(), CONFIG).findings == ()


STRICT_FIXTURES = [file for file in FIXTURE_FILES if "strict" in read_expectations(file.read_text()).variants]


def test_every_framework_with_a_default_limit_has_a_strict_fixture() -> None:
    assert {file.stem for file in STRICT_FIXTURES} >= {"dramatiq_actors", "rq_jobs", "arq_worker", "saq_worker"}


@pytest.mark.parametrize("fixture", STRICT_FIXTURES, ids=lambda path: path.stem)
def test_strict_mode_rejects_framework_defaults(fixture: Path) -> None:
    source = fixture.read_text()
    expectations = read_expectations(source)
    config = expectations.config("strict")
    assert config.strict
    strict = check_source(f"app/{fixture.name}", source.encode(), config)
    assert_matches(strict.findings, expectations.findings("strict"), fixture.name)
    defaults = expectations.per_variant["strict"]
    assert defaults and all(want.code == "CRL203" and "strict mode" in want.fragment for want in defaults)


def test_every_framework_default_is_exercised() -> None:
    """Each framework with a default limit has a strict fixture where that default applies."""
    with_default = {framework.name for framework in FRAMEWORKS if framework.default_limit is not None}
    exercised = set()
    for fixture in STRICT_FIXTURES:
        facts = check_source(f"app/{fixture.name}", fixture.read_bytes(), CONFIG).facts or {}
        exercised |= {fact.framework for fact in facts["jobs"] if fact.source == DEFAULT}
    assert exercised == with_default


def test_messages_say_what_is_missing_and_where() -> None:
    source = """
    from corral.runtime import Queue
    fetch = Queue("fetch", max_workers=3)
    @fetch.job("jobs.fetch_all")
    async def fetch_all(ctx): ...
    """
    (finding,) = check_source("app/a.py", example_source(source).encode(), CONFIG).findings
    assert (finding.line, finding.col, finding.code) == (3, 2, "CRL201")
    assert finding.message == (
        "job kind 'jobs.fetch_all' has no timeout: queue 'fetch' has no timeout; give the job timeout=..."
    )


def test_unresolvable_value_names_the_reason_and_place() -> None:
    source = """
    import os
    from celery import shared_task
    LIMIT = int(os.environ["LIMIT"])
    @shared_task(time_limit=LIMIT)
    def send(): ...
    """
    (finding,) = check_source("app/a.py", example_source(source).encode(), CONFIG).findings
    assert finding.code == "CRL204"
    assert "reads the environment with no static default (app/a.py:3)" in finding.message


def test_constant_bound_twice_is_unresolvable() -> None:
    source = """
    from corral.runtime import Queue
    TIMEOUT = 30
    if DEBUG:
        TIMEOUT = 300
    index = Queue("index", max_workers=1, timeout=TIMEOUT)
    @index.job("a")
    async def a(ctx): ...
    """
    assert codes(source) == {(6, "CRL204")}


def test_soft_time_limit_alone_never_counts() -> None:
    source = """
    from celery import Celery
    app = Celery("x")
    app.conf.task_soft_time_limit = 10
    @app.task(soft_time_limit=5)
    def a(): ...
    """
    assert codes(source) == {(4, "CRL202")}


def test_app_config_variants() -> None:
    source = """
    from celery import Celery
    app = Celery("x")
    app.conf["task_time_limit"] = 30
    app.conf.update({"task_time_limit": 0})
    @app.task
    def a(): ...
    """
    assert codes(source) == {(5, "CRL202")}  # the last setting wins: 0 is no limit


def test_task_cls_gives_the_limit() -> None:
    source = """
    from celery import Celery, Task
    class Limited(Task):
        time_limit = 20
    app = Celery("x", task_cls=Limited)
    @app.task
    def a(): ...
    """
    assert codes(source) == set()


def test_unknown_decorators_are_not_job_kinds() -> None:
    source = """
    from somewhere import app, job
    @app.task
    def a(): ...
    @job("x")
    def b(): ...
    """
    assert codes(source) == set()


def test_type_checking_blocks_are_skipped() -> None:
    source = """
    from typing import TYPE_CHECKING
    from celery import shared_task
    if TYPE_CHECKING:
        @shared_task
        def a(): ...
    """
    assert codes(source) == set()


def test_prefilter_is_sound_for_every_fixture() -> None:
    from corral.gates.rules.job_timeouts import JobTimeouts
    from corral.gates.rules.network_timeouts import NetworkTimeouts
    from corral.gates.source.prefilter import Source

    for fixture in FIXTURE_FILES:
        data = fixture.read_bytes()
        assert JobTimeouts.might_match(Source(data), CONFIG), fixture.name
        if any(want.code == "CRL210" for want in read_expectations(fixture.read_text()).common):
            assert NetworkTimeouts.might_match(Source(data), CONFIG)
    assert not JobTimeouts.might_match(Source(b"import os\nprint(os.getcwd())\n"), CONFIG)


def test_celery_annotations_for_every_task_are_applied_last_and_reach_shared_tasks() -> None:
    source = """
    from celery import Celery, shared_task
    app = Celery("x", task_annotations=[{"app.module.a": {"time_limit": 30}}, {"*": {"time_limit": 0}}])
    @app.task
    def a(): ...
    @shared_task(time_limit=60)
    def b(): ...
    other = Celery("y", task_annotations=({"*": {"time_limit": 30}}, {"app.module.c": {"time_limit": 0}}))
    @other.task
    def c(): ...
    """
    # celery/app/annotations.py resolve_all: the task's own entry, then "*", each set on the task class.
    assert codes(source) == {(3, "CRL202"), (5, "CRL202")}


def test_celery_annotations_that_cannot_be_read_are_crl204_naming_why() -> None:
    source = """
    from celery import Celery
    from proj.settings import ANNOTATIONS
    app = Celery("x")
    app.conf.task_annotations = {"*": {**ANNOTATIONS}}
    @app.task(time_limit=10)
    def a(): ...
    """
    (finding,) = check_source("app/module.py", example_source(source).encode(), CONFIG).findings
    assert finding.code == "CRL204"
    assert "{**...} may set time_limit (app/module.py:4)" in finding.message
    named = source.replace('{"*": {**ANNOTATIONS}}', '"proj.annotations:Limits"')
    (finding,) = check_source("app/module.py", example_source(named).encode(), CONFIG).findings
    assert finding.code == "CRL204"
    assert "task_annotations 'proj.annotations:Limits' is no dict the gate can read" in finding.message


def test_dramatiq_infinity_is_no_limit_and_zero_times_every_message_out() -> None:
    source = """
    import dramatiq
    @dramatiq.actor(time_limit=float("inf"))
    def endless(): ...
    @dramatiq.actor(time_limit=0)
    def immediate(): ...
    """
    findings = check_source("app/module.py", example_source(source).encode(), CONFIG).findings
    assert [(finding.line, finding.code, finding.message) for finding in findings] == [
        (2, "CRL203", 'dramatiq: time_limit=float("inf") is Dramatiq\'s "no limit", which turns the limit off'),
        (
            4,
            "CRL203",
            "dramatiq: time_limit=0 times every message out at once (the deadline is now + time_limit); "
            "give it a positive time_limit in milliseconds",
        ),
    ]


def test_celery_conf_update_with_a_dict_constant_reads_it_and_an_opaque_mapping_annotates_nothing() -> None:
    source = """
    from celery import Celery
    CONFIG = {"task_time_limit": 40, "task_annotations": {"*": {"time_limit": 0}}}
    app = Celery("x")
    app.conf.update(CONFIG)
    @app.task
    def a(): ...
    flask_config = load()
    other = Celery("y")
    other.conf.update(flask_config)
    @other.task(time_limit=10)
    def b(): ...
    @other.task
    def c(): ...
    """
    findings = check_source("app/module.py", example_source(source).encode(), CONFIG).findings
    assert [(finding.line, finding.code) for finding in findings] == [(5, "CRL202"), (12, "CRL204")]
    assert "conf.update(<mapping>) may set it" in findings[1].message
