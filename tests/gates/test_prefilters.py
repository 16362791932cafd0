"""The prefilters are sound: skipping a file's parse never hides one of its findings or facts.

Each check compares `check_source` as the gate runs it with every applicable rule run on the parsed file
(`prefilter=False`): over every fixture and rule example, over spellings chosen to slip past a textual
filter, and over real code (the standard library's modules that start threads, processes and tasks or
talk to the network, the HTTP libraries pip vendors, psycopg). Then the other side: the files a prefilter must
rule out, which is what keeps the gate fast.
"""

from __future__ import annotations

import re
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.knowledge.network import might_call_network
from corral.gates.knowledge.transaction_scopes import names_opener
from corral.gates.rules import RULES
from corral.gates.rules.hidden_spawners import HiddenSpawners
from corral.gates.rules.job_timeouts import JobTimeouts
from corral.gates.rules.network_in_transaction import NetworkInTransaction
from corral.gates.rules.network_timeouts import NetworkTimeouts
from corral.gates.rules.unmanaged_concurrency import UnmanagedConcurrency
from corral.gates.source.prefilter import Source
from expectations import FIXTURES as FIXTURES_ROOT
from expectations import example_source, read_expectations, rule_fixture_folders

CONFIG = Config(
    root=Path("/project"),
    extend_spawners=("gevent.spawn", "myapp.tasks.spawn"),
    extend_network=("boto3.client", "stripe.Charge.create", "myapp.vendor.push"),
)


def assert_prefilter_hides_nothing(relpath: str, data: bytes, config: Config = CONFIG) -> None:
    filtered = check_source(relpath, data, config)
    unfiltered = check_source(relpath, data, config, prefilter=False)
    assert (filtered.findings, filtered.facts) == (unfiltered.findings, unfiltered.facts), relpath


FIXTURES = [file for folder in rule_fixture_folders() for file in sorted(folder.glob("*.py"))]
EXAMPLES = [example for rule in RULES for example in (*rule.VALID, *rule.INVALID)]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_fixtures(fixture: Path) -> None:
    expectations = read_expectations(fixture.read_text())
    for variant in expectations.variants:  # under each configuration the fixture's header asks for, too
        config = expectations.config(variant)
        config = config._replace(
            extend_spawners=(*config.extend_spawners, *CONFIG.extend_spawners),
            extend_network=(*config.extend_network, *CONFIG.extend_network),
        )
        assert_prefilter_hides_nothing(f"app/{fixture.name}", fixture.read_bytes(), config)


# Projects whose findings come from other modules: a job decorator wrapped there, a spawner re-exported there,
# a network call made by a helper there, used in files that never name the framework, the spawner's module
# or a network API; transaction wrappers defined there, used in files that never name an opener.
PROJECTS = [
    FIXTURES_ROOT / "crl2_projects" / "rq_wrappers",
    FIXTURES_ROOT / "crl2_projects" / "helpers",
    FIXTURES_ROOT / "crl1_projects" / "reexports",
    FIXTURES_ROOT / "crl4_projects" / "clients",
    FIXTURES_ROOT / "crl4_projects" / "wrappers",
    FIXTURES_ROOT / "crl4_projects" / "signals",
    FIXTURES_ROOT / "crl4_projects" / "enqueues",
    FIXTURES_ROOT / "crl4_projects" / "held_clients",
    FIXTURES_ROOT / "crl4_projects" / "super_calls",
    FIXTURES_ROOT / "crl4_projects" / "atomic_objects",
    FIXTURES_ROOT / "crl4_projects" / "consumed_callables",
    FIXTURES_ROOT / "crl4_projects" / "wrapper_aliases",
    FIXTURES_ROOT / "crl4_projects" / "returned_openers",
    FIXTURES_ROOT / "crl2_projects" / "reexported_jobs",
]
PROJECT_FILES = [(root, path) for root in PROJECTS for path in sorted(root.rglob("*.py"))]


@pytest.mark.parametrize(("root", "path"), PROJECT_FILES, ids=lambda item: item.name)
def test_projects(root: Path, path: Path) -> None:
    assert_prefilter_hides_nothing(path.relative_to(root).as_posix(), path.read_bytes(), CONFIG._replace(root=root))


@pytest.mark.parametrize("example", EXAMPLES)
def test_rule_examples(example: str) -> None:
    assert_prefilter_hides_nothing("app/module.py", example_source(example).encode())


# Each holds a finding that a filter reading words, lines or import statements too literally would miss.
SLIPPERY = {
    "getattr through a chain of aliases": """
        import threading as t
        first = t
        second = first
        getattr(second, name)
        """,
    "loop bound over several lines": """
        import asyncio
        loop = (
            asyncio.get_event_loop()
        )
        getattr(loop, name)
        """,
    "getattr itself aliased": """
        import threading
        fetch = getattr
        fetch(threading, name)
        """,
    "getattr on a submodule": """
        import asyncio
        getattr(asyncio.tasks, name)
        """,
    "loop factory imported in parentheses": """
        from asyncio import (
            get_event_loop as current,
        )
        loop = current()
        getattr(loop, name)
        """,
    "parameter annotated with a loop type in a string": """
        import asyncio
        def run(loop: "asyncio.AbstractEventLoop", name):
            return getattr(loop, name)
        """,
    "parenthesised getattr argument": """
        import os
        getattr((os), "fork")
        """,
    "os imported after a continuation": """
        import sys, \\
            os
        os.fork()
        """,
    "os imported beside an alias": """
        import sys as system, os
        os.fork()
        """,
    "star import after a continuation": """
        from os import \\
            *
        """,
    "urllib.request named inside parentheses": """
        from urllib import (
            request,
        )
        from django.db import transaction
        with transaction.atomic():
            request.urlopen(url, timeout=5)
        """,
    "urllib.request reached through import urllib.parse": """
        import urllib.parse
        from django.db import transaction
        with transaction.atomic():
            urllib.request.urlopen(url, timeout=5)
        """,
    "network module aliased after another": """
        import json as j, requests
        from django.db import transaction
        with transaction.atomic():
            requests.get(url, timeout=5)
        """,
    "opener after a dot and a comment, the network call in a helper": """
        from .partners import send
        def f(session, url):
            with (session.  # the session's own
                  begin()):
                local(url)
        def local(url):
            import requests
            requests.post(url, timeout=5)
        """,
    "sys.modules bound by a from-import under another name": """
        from sys import modules as loaded
        loaded["threading"]
        """,
    "a spawner module's namespace through an alias": """
        import concurrent.futures as cf
        def f(name):
            return cf.__dict__ [name]
        """,
    "vars of an aliased module": """
        import threading as t
        make = vars (t)["Thread"]
        """,
    "the namespace of a submodule through its package's alias": """
        import asyncio as aio
        def f(name):
            return aio.tasks.__dict__[name]
        """,
    "vars aliased": """
        import threading
        namespace = vars
        namespace(threading)["Thread"]
        """,
    "resolve_name imported under another name": """
        from pkgutil import resolve_name as find
        find("multiprocessing:Process")
        """,
    "Popen aliased and not waited for": """
        from subprocess import Popen as Start
        Start(["sleep", "60"])
        """,
    "a per-request server through a from-import": """
        from http import server
        server.ThreadingHTTPServer(("", 0), server.BaseHTTPRequestHandler)
        """,
    "os.spawn with P_NOWAIT imported by name": """
        from os import P_NOWAIT, spawnv
        spawnv(P_NOWAIT, "/bin/sleep", ["sleep"])
        """,
    # APIs named in extend-network, through a file that imports no network library.
    "a configured network API inside a transaction": """
        from myapp import vendor
        from django.db import transaction
        with transaction.atomic():
            vendor.push("order")
        """,
    "a client a configured API returns, in a job": """
        import boto3
        from corral.runtime import Queue
        q = Queue("q", max_workers=1, timeout=5)
        s3 = boto3.client("s3")
        @q.job("k")
        def k(ctx):
            s3.put_object(Bucket="b")
        """,
    # Python reads identifiers NFKC-normalised: these are fullwidth letters spelling `threading`.
    "spawner module named with look-alike letters": """
        import \uff54\uff48\uff52\uff45\uff41\uff44\uff49\uff4e\uff47
        \uff54\uff48\uff52\uff45\uff41\uff44\uff49\uff4e\uff47.Thread(target=print)
        """,
}


@pytest.mark.parametrize("source", SLIPPERY.values(), ids=list(SLIPPERY))
def test_slippery_spellings(source: str) -> None:
    data = textwrap.dedent(source).encode()
    assert check_source("app/module.py", data, CONFIG, prefilter=False).findings, "the case must hold a finding"
    assert_prefilter_hides_nothing("app/module.py", data)


@pytest.mark.parametrize(
    ("relpath", "source"),
    [
        ("concurrent/futures/mine.py", "from .thread import ThreadPoolExecutor\nThreadPoolExecutor()\n"),
        ("asyncio/mine.py", "from . import tasks\ngetattr(tasks, name)\n"),
        ("asyncio/mine.py", "from .tasks import *\n"),
    ],
)
def test_relative_imports_inside_a_spawner_package(relpath: str, source: str) -> None:
    assert check_source(relpath, source.encode(), CONFIG, prefilter=False).findings
    assert_prefilter_hides_nothing(relpath, source.encode())


_IN_TRANSACTION = "from django.db import transaction\ndef f(url):\n    with transaction.atomic():\n        {call}\n"
_CELERY_APP = "from celery import Celery\napp = Celery('p')\n"
_CORRAL_JOB = "from corral.runtime import Queue\nq = Queue('q', max_workers=2, timeout=15)\n@q.job('k')\n"

# Found by an adversarial review: each hid its finding (or fact) from an earlier prefilter.
REVIEWED = [
    ("app/module.py", "from .. import (x,  # )\n    threading)\nthreading.Thread()\n"),
    ("app/module.py", "from concurrent import (x,  # )\n    futures)\ngetattr(futures, name)\n"),
    ("app/module.py", "from .. import (x,  # )\n    myapp)\nmyapp.tasks.spawn(f)\n"),
    ("app/module.py", "from .. import (x,  # )\n    requests)\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    (
        "app/module.py",
        "from urllib import (a,  # )\n    request)\n" + _IN_TRANSACTION.format(call="request.urlopen(u)"),
    ),
    ("urllib/x.py", "from . import (parse,  # )\n    request)\n" + _IN_TRANSACTION.format(call="request.urlopen(u)")),
    ("app/module.py", "from .. import (x,  # )\n    corral)\nr = corral.runtime.Runtime(queues=[], max_conns=3)\n"),
    (
        "app/module.py",
        "import asyncio\ndef f(loop:\n        asyncio.AbstractEventLoop):\n    return getattr(loop, name)\n",
    ),
    ("app/module.py", "import asyncio\nloop = (  # the loop\n    asyncio.get_event_loop()\n)\ngetattr(loop, name)\n"),
    ("app/module.py", "import threading\ngetattr(  # fetch\n    threading, name)\n"),
    ("app/module.py", "import threading\ngetattr((t := threading), name)\n"),
    ("app/module.py", "import asyncio\n(loop) = asyncio.get_event_loop()\ngetattr(loop, name)\n"),
    ("app/module.py", "import threading\na = (b) = threading\ngetattr(b, name)\n"),
    ("app/module.py", "import asyncio\nloop \\\n = asyncio.get_event_loop()\ngetattr(loop, name)\n"),
    ("app/module.py", "import asyncio\ndef f(loop\n      : asyncio.AbstractEventLoop):\n    return getattr(loop, n)\n"),
    ("app/module.py", "__import__('thr' 'eading')\n"),
    ("app/module.py", "__import__('\\x74hreading')\n"),
    ("app/module.py", "import importlib\nimportlib.import_module('multi' 'processing')\n"),
    ("app/module.py", "from importlib import import_module as load\nload('multi' 'processing')\n"),
    ("app/module.py", "import requests, urllib.parse as up\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    ("app/module.py", "import requests, http.cookies as c\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    (
        "app/module.py",
        "import http.client as hc, urllib.parse as up\n" + _IN_TRANSACTION.format(call="hc.HTTPConnection(u)"),
    ),
    ("app/module.py", "import caf\u00e9, requests\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    ("app/module.py", "import os . path, requests\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    (
        "app/module.py",
        "import requests, urllib.parse as up\n" + _CORRAL_JOB + "def send(ctx, url):\n    requests.post(url)\n",
    ),
    # A job calling a helper of its module whose own import (climbing out of the package) names the network.
    (
        "app/module.py",
        _CORRAL_JOB
        + "def send(ctx, u):\n    post(u)\ndef post(u):\n    from .. import requests\n    requests.get(u)\n",
    ),
    ("app/module.py", "from rq .decorators import job\n@job('low', timeout=-1)\ndef crawl(url): ...\n"),
    ("app/module.py", "from rq.\\\ndecorators import job\n@job('low')\ndef crawl(url): ...\n"),
    ("rq/x.py", "from .decorators import job\n@job('low', timeout=-1)\ndef crawl(url): ...\n"),
    ("huey/contrib/djhuey/x.py", "from . import task\n@task()\ndef crawl(url): ...\n"),
    ("app/module.py", "from celery.current_app import task\n@task\ndef f(): ...\n"),
    ("app/module.py", _CELERY_APP + "@app.\x0ctask(soft_time_limit=30)\ndef f(): ...\n"),
    ("app/module.py", _CELERY_APP + "@(app.  # c\n  task)\ndef f(): ...\n"),
    ("app/module.py", "import saq\nsettings = {'func' 'tions': [f]}\nasync def f(ctx): ...\n"),
    ("app/module.py", "import saq\nsettings = {'\\x66unctions': 3}\n"),
    ("app/module.py", "#" + " " * 450 + "-*- coding: utf-7 -*-\nimport +AHQ-hreading\n+AHQ-hreading.Thread()\n"),
    ("app/module.py", "from \\\rthreading import Thread\rThread()\r"),
    ("app/module.py", "x = 1\nfrom \\\rthreading import Thread\nThread()\n"),
    # The second round.
    ("app/module.py", "import requests  # noqa: F401\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    ("app/module.py", "import requests; import json\n" + _IN_TRANSACTION.format(call="requests.get(url)")),
    (
        "app/module.py",
        "import json, requests  # type: ignore\n" + _CORRAL_JOB + "def send(ctx, u):\n    requests.get(u)\n",
    ),
    ("app/module.py", "import builtins\nimport threading\nfetch = builtins.getattr\nfetch(threading, name)\n"),
    (
        "app/module.py",
        "from importlib import import_module\nimporter = import_module\nimporter('multi' 'processing')\n",
    ),
    ("app/module.py", 'import importlib; load = importlib.import_module\nload("multi" "processing")\n'),
    (
        "app/module.py",
        "import asyncio\ndef f(\n    name,\n    loop:\n        asyncio.AbstractEventLoop,\n):\n"
        "    return getattr(loop, name)\n",
    ),
    ("app/module.py", "x = 1  # c\rfrom .. import (\nthreading)\nthreading.Thread()\n"),
    ("asyncio.tasks.py", "from . import tasks\ngetattr(tasks, name)\n"),
]


@pytest.mark.parametrize(("relpath", "source"), REVIEWED)
def test_reviewed_spellings(relpath: str, source: str) -> None:
    data = source.encode()
    unfiltered = check_source(relpath, data, CONFIG, prefilter=False)
    assert unfiltered.findings or unfiltered.facts, "the case must hold a finding or a fact"
    assert_prefilter_hides_nothing(relpath, data)


_TRANSACTION_HEAD = "import requests\nfrom django.db import transaction\n"
_GET = "requests.get(u, timeout=5)"

# CRL401/CRL402 admit only a file where a `with` item or a decorator may open a scope: each opens one through
# a name bound elsewhere, over lines, or by a wrapper the file defines (which a text that is not the file on
# disk, as flake8 may hand it, holds without the project's pre-pass knowing it).
SCOPE_SPELLINGS = {
    "an opener's result entered": _TRANSACTION_HEAD
    + f"def f(u):\n    cm = transaction.atomic(using=u)\n    with cm:\n        {_GET}\n",
    "an alias assigned": _TRANSACTION_HEAD + f"tx = transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "a parenthesised target": _TRANSACTION_HEAD
    + f"(tx) = transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "a chain of aliases, as a decorator": _TRANSACTION_HEAD
    + f"first = transaction.atomic\nsecond = first\n@second\ndef f(u):\n    {_GET}\n",
    "an import alias over lines": "import requests\nfrom django.db.transaction import (\n    atomic\n    as tx,\n)\n"
    f"def f(u):\n    with tx():\n        {_GET}\n",
    "an alias on a continued line": _TRANSACTION_HEAD
    + f"tx = \\\n    transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "an alias in parentheses over lines": _TRANSACTION_HEAD
    + f"tx = (\n    transaction.atomic\n)\ndef f(u):\n    with tx():\n        {_GET}\n",
    "an alias in a one-line if": _TRANSACTION_HEAD
    + f"if True: tx = transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "an alias in a one-line if after a statement": _TRANSACTION_HEAD
    + f"if True: pass; tx = transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "an annotated alias": _TRANSACTION_HEAD
    + f"tx: object = transaction.atomic\ndef f(u):\n    with tx():\n        {_GET}\n",
    "method_decorator aliased, of an alias": _TRANSACTION_HEAD
    + "from django.utils.decorators import method_decorator as md\natomic_now = transaction.atomic\n"
    f"class V:\n    @md(atomic_now)\n    def post(self, u):\n        {_GET}\n",
    "a decorator of the file returning atomic(func)": _TRANSACTION_HEAD
    + f"def in_tx(func):\n    return transaction.atomic(func)\n@in_tx\ndef f(u):\n    {_GET}\n",
    "a class of the file whose __enter__ enters atomic": _TRANSACTION_HEAD
    + "class Tx:\n    def __enter__(self):\n        self.t = transaction.atomic()\n        self.t.__enter__()\n"
    f"    def __exit__(self, *a):\n        self.t.__exit__(*a)\ndef f(u):\n    with Tx():\n        {_GET}\n",
    "an opener after a comment line in a with": _TRANSACTION_HEAD
    + f"def f(u):\n    with (\n        # the transaction\n        transaction.atomic()\n    ):\n        {_GET}\n",
    "async with begin on a continued line": "import httpx\nasync def f(engine, u):\n    async with \\\n"
    "            engine.begin():\n        await httpx.AsyncClient().get(u)\n",
    "the first line a decorator": f"@transaction.atomic\ndef f(u):\n    {_GET}\n" + _TRANSACTION_HEAD,
    "with after a byte order mark": "\ufeffwith transaction.atomic():\n    " + _GET + "\n" + _TRANSACTION_HEAD,
}


@pytest.mark.parametrize("source", SCOPE_SPELLINGS.values(), ids=list(SCOPE_SPELLINGS))
def test_scope_spellings(source: str) -> None:
    data = source.encode()
    assert check_source("app/module.py", data, CONFIG, prefilter=False).findings, "the case must hold a finding"
    assert NetworkInTransaction.might_match(Source(data, "app/module.py"), CONFIG)
    assert_prefilter_hides_nothing("app/module.py", data)


# Files that name an opener only where no scope opens: in calls, attributes and imports.
NO_SCOPE = [
    _TRANSACTION_HEAD + f"def f(u):\n    transaction.on_commit(lambda: {_GET})\n    transaction.set_autocommit(True)\n",
    _TRANSACTION_HEAD + f"def f(u):\n    with transaction.mark_for_rollback_on_error(using):\n        {_GET}\n",
    _TRANSACTION_HEAD
    + f"@property\ndef f(u, atomic=transaction.atomic):\n    with open(u) as atomic_file:\n        {_GET}\n",
    "from django.db import connection\nclass C:\n    def begin(self):\n        connection.begin()\n"
    "    @cached_property\n    def x(self):\n        with self.lock:\n            return 1\n",
]


@pytest.mark.parametrize("source", NO_SCOPE)
def test_an_opener_named_outside_every_scope_is_not_read(source: str) -> None:
    data = source.encode()
    assert not NetworkInTransaction.might_match(Source(data, "app/module.py"), CONFIG)
    assert_prefilter_hides_nothing("app/module.py", data)


def test_relative_imports_that_climb_out_of_every_package() -> None:
    # As `names.py` resolves them, these name the top-level `requests` package itself.
    data = (
        b"from .. import requests\n"
        b"from django.db import transaction\n"
        b"with transaction.atomic():\n"
        b"    requests.get(u, timeout=5)\n"
    )
    assert check_source("app/views.py", data, CONFIG, prefilter=False).findings
    assert_prefilter_hides_nothing("app/views.py", data)
    assert_prefilter_hides_nothing("views.py", data.replace(b"from ..", b"from ."))


STDLIB = Path(sysconfig.get_paths()["stdlib"])
PURELIB = Path(sysconfig.get_paths()["purelib"])
REAL_CODE = [
    *(STDLIB / name for name in ("asyncio", "concurrent", "multiprocessing", "http", "urllib", "xmlrpc")),
    *(STDLIB / f"{name}.py" for name in ("socketserver", "smtplib", "threading", "subprocess", "pty", "os")),
    # Installed with the test tools: network libraries (vendored by pip) and a database driver and pool.
    *(PURELIB / "pip" / "_vendor" / name for name in ("requests", "urllib3")),
    *(PURELIB / name for name in ("psycopg", "psycopg_pool")),
]


@pytest.mark.parametrize("location", REAL_CODE, ids=lambda path: path.name)
def test_real_code(location: Path) -> None:
    files = [location] if location.is_file() else sorted(location.rglob("*.py"))
    assert files, location
    for file in files:
        relpath = str(file.relative_to(location.parent))
        data = file.read_bytes()
        # As its own package (relative imports then resolve into asyncio, requests, ...), and inside a
        # project package; both as domain code, so that every rule applies.
        assert_prefilter_hides_nothing(relpath, data)
        assert_prefilter_hides_nothing(f"app/{relpath}", data)


# The one pattern `names_opener` splits in two (each starting with a literal, which the engine skips ahead to).
_OPENER_AS_ONE_PATTERN = re.compile(
    rb"\batomic\b|\.(?:\s|\\|#[^\n]*(?![^\n]))*(?:atomic|begin|begin_nested|transaction)\b"
)


@pytest.mark.parametrize(
    "data",
    [
        b"atomic",
        b"x.atomic",
        b"non_atomic_requests",
        b"atomically",
        b"\xc3\xa9atomic()",
        b"conn.  # the connection's\n  begin()",
        b"conn . \\\n transaction()",
        b"conn.beginning",
        b"transaction.on_commit(f)",
        b"session.begin_nested",
        b"# .\nbegin",
        *(text.encode() for text in SLIPPERY.values()),
    ],
)
def test_names_opener_is_the_one_pattern(data: bytes) -> None:
    assert names_opener(data) == (_OPENER_AS_ONE_PATTERN.search(data) is not None)


def test_names_opener_is_the_one_pattern_over_real_code() -> None:
    files = [
        *FIXTURES,
        *(file for location in REAL_CODE for file in ([location] if location.is_file() else location.rglob("*.py"))),
    ]
    for file in files:
        data = file.read_bytes()
        assert names_opener(data) == (_OPENER_AS_ONE_PATTERN.search(data) is not None), file


# What each prefilter rules out: code that mentions the words a finding needs without holding one.
RULED_OUT = [
    (HiddenSpawners, "import os\nclass A:\n    def f(self, name):\n        return getattr(self, name)\n"),
    (HiddenSpawners, "import threading\ntry:\n    pass\nexcept Exception as error:\n    getattr(error, 'args')\n"),
    (HiddenSpawners, "import asyncio\nfrom concurrent import futures\nvalue = getattr(options, 'timeout')\n"),
    (UnmanagedConcurrency, "import threading\nlock = threading.Lock()\n"),
    (UnmanagedConcurrency, "import asyncio\nfrom .models import ProcessLog\n"),
    # The words only inside longer names: no scope can be opened.
    (NetworkInTransaction, "from urllib.parse import quote as urlquote\nlog.transactions_seen(beginning)\n"),
    (NetworkInTransaction, "from .client import DatabaseClient\nDatabaseClient().atomically_applied()\n"),
    (JobTimeouts, "import functools\n@functools.cache\ndef compute(): ...\n"),
    # A network call, or a helper's, with no job kind to judge it in.
    (
        NetworkTimeouts,
        "import requests\nfrom .partners import notify\ndef f(url):\n    requests.get(url)\n    notify(url)\n",
    ),
]


@pytest.mark.parametrize(("rule", "source"), RULED_OUT, ids=lambda value: getattr(value, "__name__", ""))
def test_ruled_out(rule: type, source: str) -> None:
    assert not rule.might_match(Source(source.encode(), "django/db/backends/sqlite3/base.py"), CONFIG)


def test_a_transaction_without_a_network_import_is_read() -> None:
    # `save` may be a project function that makes the call: the file's own imports cannot rule it out.
    source = b"from .client import DatabaseClient\nwith transaction.atomic():\n    save()\n"
    assert NetworkInTransaction.might_match(Source(source, "django/db/backends/sqlite3/base.py"), CONFIG)


def test_a_job_file_is_read_when_only_its_helpers_call_the_network() -> None:
    jobs = FIXTURES_ROOT / "crl2_projects" / "helpers" / "app" / "jobs.py"
    source = Source(jobs.read_bytes(), "app/jobs.py")
    assert not might_call_network(source)  # the file names no network API: its helpers in app/partners.py do
    assert NetworkTimeouts.might_match(source, CONFIG)


def test_relative_imports_inside_a_network_package_count() -> None:
    assert might_call_network(Source(b"from .api import get\n", "requests/sessions.py"))
    assert not might_call_network(Source(b"from .api import get\n", "shop/sessions.py"))


def _closed_blocks(prefix: bytes, unit: bytes) -> bytes:
    """~1 MB of valid Python: in a string, blocks of 48 lines of `unit` whose brackets all close on the
    49th, so a prefilter that read each match's line to its end would read each block 48 times."""
    rows = [unit * (300 // len(unit)) for _ in range(48)]
    block = b"\n".join(rows) + b"\n" + b")" * sum(row.count(b"(") for row in rows) + b"\n"
    quote = b"'" * 3
    return prefix + b"DOC = " + quote + b"\n" + block * (990_000 // len(block)) + quote + b"\n"


_BLOCK_CASES = [
    (b"", b"from .("),
    (b"import threading\ngetattr(x, n)\n", b"import("),
    (b"import threading\ngetattr(x, n)\n", b"x=("),
    (b"from django.db import transaction\n", b"from urllib("),
    (b"from django.db import transaction\n", b"from ..("),
]


LINEAR_BUDGET = 5.0  # seconds of CPU per rule and input


@pytest.mark.parametrize(
    "data",
    [
        *(_closed_blocks(prefix, unit) for prefix, unit in _BLOCK_CASES),
        b"import threading\ndef f(obj, name):\n    value = getattr(obj, name)\n" + b"    # see issue #1234\n" * 2_000,
        b"import threading\ngetattr(x, y)\n" + (b"#" * 79 + b"\n# Helpers\n") * 2_000,
        b"import threading\ngetattr(\n    " + b"#" * 5_000 + b"\n    1, name)\n",
        b"# " + b"__import__ " * 90_000 + b"\n",
        b"from importlib import " + b"import_module, " * 60_000 + b"\n",
        b"getattr(" + b"x = (\n" * 20_000,
        b"import threading\n" + b"getattr(a, b)\na = b\nb = a\n" * 5_000,
        b"import threading\n" + b"".join(b"getattr(n%d, x)\nn%d = m\n" % (i, i) for i in range(20_000)),
        b"import threading\ngetattr(x, y)\n" + b"x = " * 50_000,
        b"from " * 100_000,
        b"from ." * 100_000,
        b"import threading\nfrom .x import (\n" * 20_000,
        b"import " + b"a, " * 100_000,
        b"transaction.atomic " + b"x.\\\n" * 50_000,
    ],
    ids=[
        *(f"blocks of {unit.decode()}" for _, unit in _BLOCK_CASES),
        "comment-lines",
        "comment-banners",
        "long-comment",
        "many-dynamic-imports",
        "long-import-list",
        "unclosed",
        "cycle",
        "many-heads",
        "chained",
        "many-from",
        "many-relative",
        "unclosed-relative",
        "long-import",
        "continuations",
    ],
)
def test_prefilters_stay_linear(data: bytes) -> None:
    for rule in RULES:
        # CPU time, not wall time: a quadratic prefilter takes minutes here, and a loaded machine (the suite
        # runs beside other processes) stretches the wall clock, never the process's own CPU time. The
        # budget is far below minutes and above what the linear scan of these ~0.5 MB takes on a slow core
        # (1.2 s of Python 3.10 on a shared 2-core VM, where a tight Python loop runs at half a desktop's speed).
        started = time.process_time()
        rule.might_match(Source(data, "app/module.py"), CONFIG)
        assert time.process_time() - started < LINEAR_BUDGET, rule.__name__
