"""CRL2 fixture files: the findings are exactly the `# error:` comments; strict mode; messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.frameworks import FRAMEWORKS
from corral.gates.frameworks.base import DEFAULT
from expectations import FIXTURES, example_source, expected_findings

FIXTURE_FILES = sorted((FIXTURES / "crl2").glob("*.py"))
CONFIG = Config(root=Path("/project"))


def codes(source: str, config: Config = CONFIG) -> set[tuple[int, str]]:
    result = check_source("app/module.py", example_source(source).encode(), config)
    return {(finding.line, finding.code) for finding in result.findings}


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda path: path.stem)
def test_infra_and_tests_are_exempt(fixture: Path) -> None:
    for relpath in (f"app/infra/{fixture.name}", f"tests/{fixture.name}"):
        assert check_source(relpath, fixture.read_bytes(), CONFIG).findings == ()


# The lines of each fixture where a framework's default limit applies, for every framework with one.
DEFAULTS = {"dramatiq_actors": {7}, "rq_jobs": {8}, "arq_worker": {22, 23}, "saq_worker": {17}}


def test_every_framework_default_is_exercised() -> None:
    with_default = {framework.name for framework in FRAMEWORKS if framework.default_limit is not None}
    exercised = set()
    for fixture in DEFAULTS:
        facts = check_source(f"app/{fixture}.py", (FIXTURES / "crl2" / f"{fixture}.py").read_bytes(), CONFIG).facts
        exercised |= {fact["framework"] for fact in facts["jobs"] if fact["source"] == DEFAULT}
    assert exercised == with_default


@pytest.mark.parametrize(("fixture", "defaults"), sorted(DEFAULTS.items()))
def test_strict_mode_rejects_framework_defaults(fixture: str, defaults: set[int]) -> None:
    source = (FIXTURES / "crl2" / f"{fixture}.py").read_text()
    lenient = check_source(f"app/{fixture}.py", source.encode(), CONFIG)
    assert {fact["line"] for fact in lenient.facts["jobs"] if fact["source"] == DEFAULT} == defaults
    strict = check_source(f"app/{fixture}.py", source.encode(), CONFIG._replace(strict=True))
    found = {(finding.line, finding.code) for finding in strict.findings}
    assert found == expected_findings(source) | {(line, "CRL203") for line in defaults}
    for line in defaults:
        assert any("strict mode" in f.message for f in strict.findings if f.line == line)


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
        if "CRL210" in fixture.read_text():
            assert NetworkTimeouts.might_match(Source(data), CONFIG)
    assert not JobTimeouts.might_match(Source(b"import os\nprint(os.getcwd())\n"), CONFIG)
