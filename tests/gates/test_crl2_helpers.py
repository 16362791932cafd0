"""CRL210 through project helpers: a job's call of a project function is judged by the network calls it makes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import copy_project, run_corral, run_flake8_crl
from expectations import FIXTURES

HELPERS = FIXTURES / "crl2_projects" / "helpers"
FETCH = "import requests\n\n\ndef fetch(url, timeout={timeout}):\n    return requests.get(url, timeout=timeout)\n"
CHAIN = "fetch() -> requests.get (app/helpers.py:5)"


def findings(root: Path, *args: str) -> list[str]:
    completed = run_corral("check", *args, cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    return completed.stdout.splitlines()[:-1]


NOT_SHORTER = "is not shorter than the"
IN_SYNC = "inside job 'orders.sync' (job 'orders.sync' times out after 30 s)"
UNTIMED = "post_untimed() -> requests.post (app/partners.py:18) without a timeout"
# The project's findings, one per call site in a job (the calls each job makes below them stay clean).
EXPECTED = [
    f"app/jobs.py:29:5: CRL210 notify_partner() -> {UNTIMED} {IN_SYNC}",
    f"app/jobs.py:30:5: CRL210 post_slowly() -> requests.post (app/partners.py:26) timeout 60 s {NOT_SHORTER} 30 s "
    "timeout of job 'orders.sync'",
    # The helper's first call has a timeout; its second does not.
    f"app/jobs.py:31:5: CRL210 check_then_post() -> requests.post (app/partners.py:31) without a timeout {IN_SYNC}",
    "app/jobs.py:32:5: CRL210 sync_all() -> step_one() -> step_two() -> ... -> requests.post (app/partners.py:18) "
    f"without a timeout {IN_SYNC}",
    f"app/jobs.py:33:5: CRL210 notify() -> {UNTIMED} {IN_SYNC}",
    "app/jobs.py:34:5: CRL210 ping() -> pong() -> post_slowly() -> requests.post (app/partners.py:26) timeout 60 s "
    f"{NOT_SHORTER} 30 s timeout of job 'orders.sync'",
    # A timeout passed to the helper's parameter, read at the call.
    f"app/jobs.py:35:5: CRL210 post_json() -> requests.post (app/partners.py:14) timeout 45 s {NOT_SHORTER} 30 s "
    "timeout of job 'orders.sync'",
    "app/jobs.py:36:5: CRL204 relay() -> post_json() -> requests.post (app/partners.py:14) timeout order is a local "
    "name, not a module-level constant (app/jobs.py:36)",
    f"app/jobs.py:37:5: CRL210 forward() -> requests.get (app/partners.py:39) without a timeout {IN_SYNC}",
    f"app/jobs.py:38:5: CRL210 through_the_client() -> httpx.Client (app/partners.py:10) timeout 30 s {NOT_SHORTER} "
    "30 s timeout of job 'orders.sync'",
    # The default of the helper's parameter, against a job shorter than it.
    f"app/jobs.py:56:5: CRL210 post_json() -> requests.post (app/partners.py:14) timeout 5 s {NOT_SHORTER} 4 s "
    "timeout of job 'quick.ping'",
    "app/tasks.py:13:5: CRL210 sync_all() -> step_one() -> step_two() -> ... -> requests.post (app/partners.py:18) "
    "without a timeout inside job 'celery_sync' (job 'celery_sync' times out after 20 s)",
    f"app/tasks.py:19:5: CRL210 post_slowly() -> requests.post (app/partners.py:26) timeout 60 s {NOT_SHORTER} 30 s "
    "timeout of job 'rq_sync'",
    "app/tasks.py:25:5: CRL210 relay() -> post_json() -> requests.post (app/partners.py:14) timeout 10 s "
    f"{NOT_SHORTER} 10 s timeout of job 'dramatiq_sync'",
]


@pytest.fixture
def helpers(tmp_path: Path) -> Path:
    target = tmp_path / "helpers"
    copy_project(HELPERS, target)
    return target


def test_each_call_of_a_helper_is_judged_by_the_network_calls_it_makes(helpers: Path) -> None:
    assert findings(helpers, "--no-cache") == EXPECTED


def test_a_cached_job_file_follows_the_helpers_it_reached(helpers: Path) -> None:
    assert findings(helpers) == EXPECTED  # warms the cache
    partners = helpers / "app" / "partners.py"
    original = partners.read_text()
    # The helper's default grows past quick.ping's 4 s and orders.sync's 30 s: jobs.py must be judged again.
    partners.write_text(original.replace("PARTNER_TIMEOUT = 5", "PARTNER_TIMEOUT = 3"))
    assert not any(":56:" in line for line in findings(helpers))
    partners.write_text(original.replace("PARTNER_TIMEOUT = 5", "PARTNER_TIMEOUT = 40"))
    changed = findings(helpers)
    assert any(line.startswith("app/jobs.py:40:5: CRL210 post_json() -> requests.post") for line in changed), changed
    partners.write_text(original)
    assert findings(helpers) == EXPECTED


def test_flake8_reports_the_same_chains(helpers: Path) -> None:
    completed = run_flake8_crl("app/jobs.py", "app/tasks.py", cwd=helpers)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == findings(helpers, "--no-cache")


# A job of every framework the gate knows, calling `fetch(url)` from app/helpers.py: the job's limit is 30 s
# where the framework takes one (SAQ's default is 10 s; Huey has none; Procrastinate's is the body's deadline).
JOBS = {
    "corral": """
        from corral.runtime import Queue
        from app.helpers import fetch
        q = Queue("q", max_workers=2, timeout=30)
        @q.job("crawl")
        def crawl(ctx, url):
            fetch(url)
        """,
    "celery": """
        from celery import Celery
        from app.helpers import fetch
        app = Celery("p")
        @app.task(time_limit=30)
        def crawl(url):
            fetch(url)
        """,
    "rq": """
        from rq.decorators import job
        from app.helpers import fetch
        @job("default", timeout=30)
        def crawl(url):
            fetch(url)
        """,
    "django-rq": """
        from django_rq import job
        from app.helpers import fetch
        @job("default", timeout=30)
        def crawl(url):
            fetch(url)
        """,
    "rq wrapped": """
        from app.helpers import fetch
        from app.wrappers import crawl_job
        @crawl_job
        def crawl(url):
            fetch(url)
        """,
    "dramatiq": """
        import dramatiq
        from app.helpers import fetch
        @dramatiq.actor(time_limit=30_000)
        def crawl(url):
            fetch(url)
        """,
    "arq": """
        from arq import func
        from app.helpers import fetch
        async def crawl(ctx, url):
            fetch(url)
        class WorkerSettings:
            functions = [func(crawl, timeout=30)]
        """,
    "taskiq": """
        from taskiq import InMemoryBroker
        from app.helpers import fetch
        broker = InMemoryBroker()
        @broker.task(timeout=30)
        async def crawl(url):
            fetch(url)
        """,
    "saq": """
        from saq import Queue
        from app.helpers import fetch
        async def crawl(ctx, url):
            fetch(url)
        settings = {"queue": Queue.from_url("redis://localhost"), "functions": [crawl]}
        """,
    "huey": """
        from huey import RedisHuey
        from app.helpers import fetch
        huey = RedisHuey("p")
        @huey.task()
        def crawl(url):
            fetch(url)
        """,
    "procrastinate": """
        import asyncio
        import procrastinate
        from app.helpers import fetch
        app = procrastinate.App(connector=procrastinate.PsycopgConnector())
        @app.task
        async def crawl(url):
            async with asyncio.timeout(30):
                fetch(url)
        """,
}
WRAPPERS = "from functools import partial\nfrom rq.decorators import job\ncrawl_job = partial(job, 'q', timeout=30)\n"


def _jobs_project(project, jobs: str, timeout: str) -> Path:
    return project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/helpers.py": FETCH.format(timeout=timeout),
            "app/wrappers.py": WRAPPERS,
            "app/jobs.py": jobs,
        }
    )


@pytest.mark.parametrize("framework", JOBS)
def test_every_framework_judges_the_helpers_its_jobs_call(project, framework: str) -> None:
    root = _jobs_project(project, JOBS[framework], "None")
    crl210 = [line for line in findings(root, "--no-cache") if " CRL210 " in line]
    assert len(crl210) == 1, crl210
    assert f" CRL210 {CHAIN} without a timeout inside job " in crl210[0]


@pytest.mark.parametrize("framework", JOBS)
def test_a_helper_with_a_short_timeout_stays_clean_in_every_framework(project, framework: str) -> None:
    root = _jobs_project(project, JOBS[framework], "1")
    assert [line for line in findings(root, "--no-cache") if " CRL210 " in line or " CRL204 " in line] == []


JOB = """
    import functools
    import requests
    from typing import TYPE_CHECKING
    from corral.runtime import Queue
    from app.helpers import Poster, from_settings, keyword_only, outer, positional_only, quick, slow, untimed
    from app.helpers import with_a_client
    from app.settings import QUICK_PAIR, SLOW_PAIR
    q = Queue("q", max_workers=2, timeout=30)
    @q.job("k")
    def k(ctx, url, options, args):
        {call}
    """
HELPER_MODULES = {
    "pyproject.toml": "[tool.corral]\n",
    "app/__init__.py": "",
    "app/settings.py": "HTTP_TIMEOUT = 40\nQUICK_PAIR = (3, 5)\nSLOW_PAIR = (10, 30)\nODD_PAIR = (3, HTTP_TIMEOUT)\n",
    "app/helpers.py": """
        import requests
        from app.settings import HTTP_TIMEOUT

        def keyword_only(url, *, timeout=60):
            return requests.get(url, timeout=timeout)

        def positional_only(url, timeout, /):
            return requests.get(url, timeout=timeout)

        def from_settings(url, timeout=HTTP_TIMEOUT):
            return requests.get(url, timeout=timeout)

        def outer(url, seconds):
            return inner(url, seconds)

        def inner(url, wait):
            return requests.get(url, timeout=wait)

        def untimed(url):
            return requests.get(url)

        def with_a_client(client, url):
            return client.get(url)

        class Poster:
            def __init__(self, url, timeout=None):
                requests.get(url, timeout=timeout)

            def __call__(self, url, timeout=60):
                return requests.get(url, timeout=timeout)

            def send(self, url, timeout):
                return requests.get(url, timeout=timeout)

        from functools import partial

        quick = partial(keyword_only, timeout=3)
        slow = partial(keyword_only, timeout=HTTP_TIMEOUT)
        """,
}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("keyword_only(url)", "CRL210 keyword_only() -> requests.get (app/helpers.py:5) timeout 60 s is not shorter"),
        ("keyword_only(url, timeout=5)", None),
        ("positional_only(url, 5)", None),
        ("positional_only(url, 31)", "CRL210 positional_only() -> requests.get (app/helpers.py:8) timeout 31 s"),
        ("from_settings(url)", "CRL210 from_settings() -> requests.get (app/helpers.py:11) timeout 40 s"),
        ("from_settings(url, 20)", None),
        ("outer(url, 50)", "CRL210 outer() -> inner() -> requests.get (app/helpers.py:17) timeout 50 s"),
        ("outer(url, seconds=5)", None),
        (
            "from_settings(url, **options)",
            "CRL204 from_settings() -> requests.get (app/helpers.py:11) timeout "
            "timeout of from_settings() may come from **kwargs",
        ),
        (
            "positional_only(*args)",
            "CRL204 positional_only() -> requests.get (app/helpers.py:8) timeout timeout of "
            "positional_only() may come from *args",
        ),
        (
            "outer(url, options)",
            "CRL204 outer() -> inner() -> requests.get (app/helpers.py:17) timeout options is a local name",
        ),
        # A client the gate does not know by construction is not judged (no guessing).
        ("with_a_client(options, url)", None),
        # Calls that run later, or never.
        ("ctx.defer(lambda: untimed(url))", None),
        ("ctx.defer(untimed, url)", None),
        ("if TYPE_CHECKING:\n            untimed(url)", None),
        ("def later():\n            untimed(url)", None),
        # A function defined in the job and called there runs now.
        ("def now():\n            untimed(url)\n        now()", "CRL210 now() -> untimed() -> requests.get"),
        # A (connect, read) pair from a constant of another module reads like a literal one: their sum.
        ("requests.get(url, timeout=QUICK_PAIR)", None),
        ("requests.get(url, timeout=SLOW_PAIR)", "CRL210 requests.get timeout 40 s is not shorter than the 30 s"),
        (
            "import app.settings\n        requests.get(url, timeout=app.settings.ODD_PAIR)",
            "CRL210 requests.get timeout 43 s",
        ),
        ("keyword_only(url, timeout=QUICK_PAIR)", None),
        # A partial's arguments come first, read where it is made; the call's keywords replace its own.
        ("functools.partial(keyword_only, url)(timeout=5)", None),
        ("p = functools.partial(keyword_only, url, timeout=5)\n        p()", None),
        ("p = functools.partial(keyword_only, url, timeout=5)\n        p(timeout=50)", "timeout 50 s is not shorter"),
        ("p = functools.partial(positional_only, url)\n        p(5)", None),
        # A partial made in another module: its arguments are read there.
        ("quick(url)", None),
        ("slow(url)", "CRL210 keyword_only() -> requests.get (app/helpers.py:5) timeout 40 s is not shorter"),
        ("slow(url, timeout=5)", None),
        ("p = functools.partial(positional_only, url, 31)\n        p()", "positional_only() -> requests.get "),
        (
            "seconds = 3\n        p = functools.partial(positional_only, url, seconds)\n        p()",
            "CRL204 positional_only() -> requests.get (app/helpers.py:8) timeout seconds is a local name",
        ),
        (
            "p = functools.partial(keyword_only, url, **options)\n        p()",
            "CRL204 keyword_only() -> requests.get (app/helpers.py:5) timeout timeout of keyword_only() may come from",
        ),
        (
            "p = functools.partial(keyword_only, url, timeout=5)\n        p(**options)",
            "CRL204 keyword_only() -> requests.get (app/helpers.py:5) timeout timeout of keyword_only() may come from",
        ),
        # `Poster(...)` runs `__init__`, calling an instance `__call__`: `self` is bound either way.
        ("Poster(url)", "CRL210 Poster.__init__() -> requests.get (app/helpers.py:27) without a timeout"),
        ("Poster(url, 5)", None),
        ("Poster(url, 5)(url)", "CRL210 Poster.__call__() -> requests.get (app/helpers.py:30) timeout 60 s"),
        ("poster = Poster(url, 5)\n        poster(url, 3)", None),
        ("functools.partial(Poster(url, 1).send, url)(5)", None),
        (
            "functools.partial(Poster.send, Poster(url, 1), url)(40)",
            "Poster.send() -> requests.get (app/helpers.py:33) timeout 40 s",
        ),
    ],
)
def test_arguments_passed_to_a_helper_are_read_at_the_call(project, call: str, expected: str | None) -> None:
    root = project({**HELPER_MODULES, "app/jobs.py": JOB.replace("{call}", call)})
    lines = [line for line in findings(root, "--no-cache") if line.startswith("app/jobs.py")]
    if expected is None:
        assert lines == []
    else:
        assert len(lines) == 1 and expected in lines[0], lines


SETTINGS = {
    "arq": "from arq import func\nfrom app.crawl import crawl\nclass WorkerSettings:\n    functions = [{kind}]\n",
    "saq": "import saq\nfrom app.crawl import crawl\nsettings = {{'functions': [{kind}]}}\n",
    "saq cron": "from saq import CronJob\nfrom app.crawl import crawl\n"
    "cron = [CronJob(crawl, cron='@daily', timeout=5)]\n",
}
CRAWL = "import requests\nfrom app.helpers import fetch\n\n\nasync def crawl(ctx, url):\n    {body}\n"


@pytest.mark.parametrize(
    ("settings", "kind", "body", "expected"),
    [
        ("arq", "crawl", "requests.get(url)", "CRL210 crawl() -> requests.get (app/crawl.py:6) without a timeout"),
        ("arq", "func(crawl, timeout=30)", "fetch(url)", f"CRL210 crawl() -> {CHAIN} without a timeout"),
        (
            "arq",
            "func(crawl, timeout=30)",
            "requests.get(url, timeout=30)",
            "timeout 30 s is not shorter than the 30 s",
        ),
        ("saq", "('alias', crawl)", "requests.get(url, timeout=10)", "timeout 10 s is not shorter than the 10 s"),
        ("saq cron", "", "requests.get(url, timeout=5)", "timeout 5 s is not shorter than the 5 s timeout"),
        ("arq", "func(crawl, timeout=30)", "requests.get(url, timeout=3)", None),
        ("saq", "crawl", "requests.get(url, timeout=3)", None),
        ("saq cron", "", "fetch(url, 1)", None),
    ],
)
def test_a_kind_declared_for_a_function_of_another_module_is_judged_at_the_declaration(
    project, settings: str, kind: str, body: str, expected: str | None
) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/helpers.py": FETCH.format(timeout="None"),
            "app/crawl.py": CRAWL.format(body=body),
            "app/worker.py": SETTINGS[settings].format(kind=kind),
        }
    )
    lines = [line for line in findings(root, "--no-cache") if " CRL210 " in line or " CRL204 " in line]
    if expected is None:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("app/worker.py:") and expected in lines[0], lines


VENDOR_JOBS = {
    "app/__init__.py": "",
    "app/storage.py": "import boto3\n\n\ndef upload(key):\n    boto3.client('s3').put_object(Bucket='b', Key=key)\n",
    "app/jobs.py": "from corral.runtime import Queue\nfrom app.storage import upload\n"
    "q = Queue('q', max_workers=2, timeout=30)\n\n\n@q.job('k')\ndef k(ctx, key):\n    upload(key)\n",
}


def test_extend_network_reaches_the_helpers_a_job_calls_and_keys_the_cache(project) -> None:
    root = project({"pyproject.toml": '[tool.corral]\nextend-network = ["boto3.client"]\n', **VENDOR_JOBS})
    expected = (
        "app/jobs.py:8:5: CRL210 upload() -> boto3.client (app/storage.py:5) without a timeout the gate can read "
        "inside job 'k' (job 'k' times out after 30 s)"
    )
    assert [line for line in findings(root) if " CRL210 " in line] == [expected]
    # Without the setting the same files are clean: a result cached under the setting is not served.
    (root / "pyproject.toml").write_text("[tool.corral]\n")
    assert [line for line in findings(root) if " CRL210 " in line] == []


MAIL_JOB = (
    "from corral.runtime import Queue\nfrom django.core.mail import send_mail\n"
    "q = Queue('q', max_workers=2, timeout=30)\n\n\n@q.job('k')\ndef k(ctx, to):\n    send_mail('s', 'b', None, [to])\n"
)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"app/settings.py": "EMAIL_TIMEOUT = 10\n"}, None),
        (
            {"app/settings.py": "DEBUG = False\nEMAIL_TIMEOUT = 60\n"},
            "CRL210 django.core.mail.send_mail (EMAIL_TIMEOUT at app/settings.py:2) timeout 60 s is not shorter",
        ),
        (
            {"app/settings.py": "EMAIL_TIMEOUT = None\n"},
            "CRL210 django.core.mail.send_mail (EMAIL_TIMEOUT at app/settings.py:1) without a timeout",
        ),
        # Settings modules that agree give one value; ones that disagree, or a value not written out, none.
        ({"app/settings.py": "EMAIL_TIMEOUT = 10\n", "app/settings_prod.py": "EMAIL_TIMEOUT = 10\n"}, None),
        (
            {"app/settings.py": "EMAIL_TIMEOUT = 10\n", "app/settings_prod.py": "EMAIL_TIMEOUT = 20\n"},
            "CRL204 django.core.mail.send_mail (EMAIL_TIMEOUT) timeout settings modules set different values "
            "(10 at app/settings.py:1, 20 at app/settings_prod.py:1)",
        ),
        (
            {"app/settings.py": "import os\nEMAIL_TIMEOUT = int(os.environ['MAIL_TIMEOUT'])\n"},
            "CRL204 django.core.mail.send_mail (EMAIL_TIMEOUT at app/settings.py:2) timeout",
        ),
        # Read, never assigned: not a setting.
        ({"app/mailer.py": "from django.conf import settings\nWAIT = settings.EMAIL_TIMEOUT\n"}, "without a timeout"),
    ],
)
def test_django_mail_runs_under_the_email_timeout_of_the_settings(project, settings, expected: str | None) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/__init__.py": "", "app/jobs.py": MAIL_JOB, **settings})
    lines = [line for line in findings(root, "--no-cache") if line.startswith("app/jobs.py")]
    if expected is None:
        assert lines == []
    else:
        assert len(lines) == 1 and expected in lines[0], lines


def test_a_cached_mail_job_follows_its_settings(project) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/jobs.py": MAIL_JOB,
            "app/settings.py": "EMAIL_TIMEOUT = 10\n",
        }
    )
    assert [line for line in findings(root) if " CRL210 " in line] == []
    (root / "app" / "settings.py").write_text("EMAIL_TIMEOUT = 45\n")
    assert [line for line in findings(root) if " CRL210 " in line] != []
