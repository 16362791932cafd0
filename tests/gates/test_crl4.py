"""CRL401 end to end (fixture files through `check_source`), and the network knowledge it reads."""

from __future__ import annotations

import ast
import textwrap
import time
from pathlib import Path

import hypothesmith
import pytest
from conftest import generated_examples
from corral.gates.analysis.names import ModuleNames
from corral.gates.config import Config
from corral.gates.engine.run import check_source
from corral.gates.knowledge.network import NetworkCalls, might_call_network
from corral.gates.rules import CODES
from corral.gates.rules.network_in_transaction import NetworkInTransaction
from corral.gates.source.prefilter import Source
from expectations import FIXTURES, assert_matches, example_source, read_expectations
from hypothesis import HealthCheck, given, settings

CONFIG = Config(root=Path("/project"))
FIXTURE_FILES = sorted((FIXTURES / "crl4").glob("*.py"))


def findings(source: str, relpath: str = "app/module.py") -> list[tuple[int, str, str]]:
    data = textwrap.dedent(source).lstrip("\n").encode()
    return [(finding.line, finding.code, finding.message) for finding in check_source(relpath, data, CONFIG).findings]


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda path: path.stem)
def test_infra_is_judged_and_tests_are_exempt(fixture: Path) -> None:
    data = fixture.read_bytes()
    expectations = read_expectations(fixture.read_text())
    config = expectations.config()
    infra = check_source(f"app/infra/{fixture.name}", data, config).findings
    assert_matches(infra, expectations.findings())
    for relpath in (f"tests/{fixture.name}", f"app/test_{fixture.name}", f"app/tests/{fixture.name}"):
        assert check_source(relpath, data, config).findings == ()


def test_fixtures_cover_every_kind_of_scope_and_library() -> None:
    messages = " ".join(
        finding.message
        for fixture in FIXTURE_FILES
        for finding in check_source(f"app/{fixture.name}", fixture.read_bytes(), CONFIG).findings
    )
    for scope in ("transaction.atomic()", "@transaction.atomic", ".begin()", ".begin_nested()", ".transaction()"):
        assert f"{scope};" in messages, scope
    assert "db.atomic();" in messages
    for library in ("requests.", "httpx.", "aiohttp.", "urllib.request.", "urllib3.", "http.client.", "smtplib."):
        assert library in messages, library
    assert "socket.create_connection" in messages


@pytest.mark.parametrize(
    "source",
    [*(fixture.read_text() for fixture in FIXTURE_FILES), *map(example_source, NetworkInTransaction.INVALID)],
)
def test_prefilter_admits_every_file_with_a_finding(source: str) -> None:
    assert NetworkInTransaction.might_match(Source(source.encode()), CONFIG)


def test_prefilter_skips_files_without_a_transaction_and_reads_those_without_a_network_module() -> None:
    no_network = b"from django.db import transaction\nwith transaction.atomic():\n    save()\n"
    no_transaction = b"import requests\nrequests.post(url, timeout=5)\n"
    # `save` may be a project function that talks to the network: the transaction's file is read.
    assert NetworkInTransaction.might_match(Source(no_network), CONFIG)
    assert not NetworkInTransaction.might_match(Source(no_transaction), CONFIG)
    # A relative import resolves against the file's own package, which may be a network library.
    assert might_call_network(Source(b"from .api import get\n", "requests/sessions.py"))


@pytest.mark.parametrize(
    "data",
    [
        b"x = session.\n" + b"#" * 100_000 + b"\n",
        b"import " + b"a, " * 100_000,
        b"from " * 100_000,
        b"transaction.atomic " + b"x.\\\n" * 50_000,
    ],
    ids=["hashes", "long-import", "many-from", "continuations"],
)
def test_prefilter_stays_linear(data: bytes) -> None:
    started = time.process_time()
    NetworkInTransaction.might_match(Source(data), CONFIG)
    assert time.process_time() - started < 1


def test_messages_say_what_is_wrong_and_what_to_do() -> None:
    django = """
        import requests
        from django.db import transaction
        def f(url):
            with transaction.atomic():
                requests.post(url, timeout=5)
    """
    assert findings(django) == [
        (
            5,
            "CRL401",
            "requests.post inside transaction.atomic(); "
            "make the call after commit (transaction.on_commit) or outside the transaction",
        )
    ]
    sqlalchemy = """
        import httpx
        def f(engine, url):
            with engine.begin() as conn:
                httpx.get(url)
    """
    assert findings(sqlalchemy) == [
        (4, "CRL401", "httpx.get inside engine.begin(); make the call outside the transaction, after it commits")
    ]


def test_a_call_passed_to_on_commit_runs_now() -> None:
    source = """
        import requests
        from django.db import transaction
        @transaction.atomic
        def f(url):
            transaction.on_commit(requests.post(url, timeout=5))
    """
    assert findings(source) == [
        (
            5,
            "CRL401",
            "requests.post runs now, inside @transaction.atomic, not after commit; "
            "pass on_commit a callable (lambda: ... or functools.partial(...))",
        )
    ]


def test_a_local_function_is_reported_where_it_is_called() -> None:
    source = """
        import requests
        def f(db, url):
            def notify():
                requests.post(url, timeout=5)
                requests.get(url, timeout=5)
            with db.atomic():
                notify()
    """
    assert findings(source) == [
        (
            7,
            "CRL401",
            "notify() calls requests.get inside db.atomic(); make the call outside the transaction, after it commits",
        ),
        (
            7,
            "CRL401",
            "notify() calls requests.post inside db.atomic(); make the call outside the transaction, after it commits",
        ),
    ]


def test_items_after_the_transaction_in_one_with_are_inside_it() -> None:
    source = """
        import smtplib
        def f(conn, host):
            with smtplib.SMTP(host) as before, conn.transaction(), smtplib.SMTP(host) as after:
                pass
    """
    assert [(line, code) for line, code, _ in findings(source)] == [(3, "CRL401")]
    (_, _, message) = findings(source)[0]
    assert message.startswith("smtplib.SMTP inside conn.transaction()")


def test_code_that_never_runs_is_not_judged() -> None:
    source = """
        from typing import TYPE_CHECKING
        from django.db import transaction
        if TYPE_CHECKING:
            import requests
            with transaction.atomic():
                requests.post(url)
    """
    assert findings(source) == []


def test_deeply_chained_local_functions_are_visited_once_per_call() -> None:
    # Each helper calls the next twice: following every call would take 2**40 visits.
    helpers = "\n".join(f"    def h{index}():\n        h{index + 1}()\n        h{index + 1}()" for index in range(40))
    source = (
        "import requests\nfrom django.db import transaction\ndef f(url):\n"
        f"{helpers}\n    def h40():\n        requests.get(url)\n"
        "    with transaction.atomic():\n        h0()\n"
    )
    started = time.process_time()
    result = check_source("app/chain.py", source.encode(), CONFIG)
    assert time.process_time() - started < 5
    assert [finding.message.split(" ")[:3] for finding in result.findings] == [["h0()", "calls", "requests.get"]]


def _calls(source: str) -> tuple[NetworkCalls, ModuleNames, ast.Module, list[ast.Call]]:
    tree = ast.parse(textwrap.dedent(source))
    names = ModuleNames(tree, "app.module")
    # In source order: ast.walk goes breadth first.
    calls = sorted(
        (node for node in ast.walk(tree) if isinstance(node, ast.Call)), key=lambda c: (c.lineno, c.col_offset)
    )
    return NetworkCalls(tree, names), names, tree, calls


def test_classify_names_the_library_the_api_and_the_timeout() -> None:
    network, names, _, calls = _calls(
        """
        import socket, urllib.request, requests
        from smtplib import LMTP
        urllib.request.urlopen(url, None, 3)
        socket.create_connection(address, timeout=4)
        requests.get(url)
        LMTP(host, 24, None, None, 5)
        urllib.request.urlopen(*args)
        """
    )
    classified = [network.classify(call, names.root) for call in calls]
    assert [(found.library, found.api) for found in classified if found] == [
        ("urllib", "urllib.request.urlopen"),
        ("socket", "socket.create_connection"),
        ("requests", "requests.get"),
        ("smtplib", "smtplib.LMTP"),
        ("urllib", "urllib.request.urlopen"),
    ]
    timeouts = [found.timeout for found in classified if found]
    assert [ast.unparse(timeout) if timeout is not None else None for timeout in timeouts] == [
        "3",
        "4",
        None,
        "5",
        None,
    ]


def test_classify_tracks_clients_by_construction_with_and_annotation() -> None:
    network, names, tree, calls = _calls(
        """
        import aiohttp, httpx, requests
        async def f(session: "aiohttp.ClientSession", url):
            async with httpx.AsyncClient() as client:
                await client.get(url, timeout=2)
            await session.ws_connect(url)
            other = requests.Session()
            other.mount("https://", adapter)
            other.send(prepared)
        """
    )
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef))
    scope = names.scope_of(function)
    classified = [network.classify(call, scope) for call in calls]
    assert [found.api for found in classified if found] == [
        "httpx.AsyncClient.get",
        "aiohttp.ClientSession.ws_connect",
        "requests.Session.send",
    ]
    (with_timeout,) = [found for found in classified if found and found.timeout is not None]
    assert with_timeout.api == "httpx.AsyncClient.get"


def test_every_code_is_registered() -> None:
    assert CODES["CRL401"] == NetworkInTransaction.codes["CRL401"]
    assert not NetworkInTransaction.skips_infra and NetworkInTransaction.skips_tests


PRELUDE = (
    "import requests, httpx\nfrom django.db import transaction\ndef generated(url):\n    with transaction.atomic():\n"
)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=generated_examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar())
def test_generated_programs_inside_a_transaction(source: str) -> None:
    data = (PRELUDE + textwrap.indent(source, "        ") + "\n        pass\n").encode("utf-8", "surrogatepass")
    for finding in check_source("app/generated.py", data, CONFIG).findings:
        assert finding.code in CODES
        assert finding.line >= 1 and finding.col >= 1
