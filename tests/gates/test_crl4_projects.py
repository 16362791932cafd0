"""CRL4 across functions and modules, through the real command: a fixture project and its cache."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from conftest import copy_project, run_corral, run_flake8_crl
from corral.gates.analysis import modules
from corral.gates.analysis.project import may_bind_function, may_bind_value
from corral.gates.engine import cache
from corral.gates.knowledge.transaction_scopes import wrapper_words
from expectations import FIXTURES

PROJECTS = FIXTURES / "crl4_projects"
CLIENTS = PROJECTS / "clients"
ADVICE = "inside transaction.atomic(); make the call after commit (transaction.on_commit) or outside the transaction"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    target = tmp_path / "shop"
    copy_project(PROJECTS / "shop", target)
    return target


def findings(root: Path, *args: str) -> list[str]:
    completed = run_corral("check", *args, cwd=root)
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    return completed.stdout.splitlines()[:-1]


def test_calls_are_followed_through_helpers_modules_cycles_reexports_and_methods(shop: Path) -> None:
    post = "post_json() -> requests.post (shop/partners.py:10)"
    assert findings(shop, "--no-cache") == [
        f"shop/views.py:11:9: CRL401 notify_partner() -> {post} {ADVICE}",
        f"shop/views.py:16:9: CRL401 send_receipt() -> notify_partner() -> {post} {ADVICE}",
        f"shop/views.py:21:9: CRL401 ping() -> pong() -> {post} {ADVICE}",
        f"shop/views.py:26:9: CRL401 notify() -> {post} {ADVICE}",
        f"shop/views.py:33:9: CRL401 Checkout.announce() -> notify_partner() -> {post} "
        + ADVICE.replace("transaction.atomic()", "@transaction.atomic"),
    ]


def test_a_cached_result_follows_the_helpers_it_reached(shop: Path) -> None:
    assert len(findings(shop)) == 5  # warms the cache
    partners = shop / "shop" / "partners.py"
    original = partners.read_text()
    # The helper two modules away stops calling the network: views.py's cached findings must not be served.
    partners.write_text(original.replace("    return requests.post(url, json=payload, timeout=5)", "    return url"))
    assert findings(shop) == []
    partners.write_text(original)
    assert len(findings(shop)) == 5


def test_flake8_reports_the_same_chains(shop: Path) -> None:
    completed = run_flake8_crl("shop/views.py", cwd=shop)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == findings(shop, "--no-cache")


def test_a_module_read_without_a_parse_is_a_dependency_too(project) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/views.py": """
                from django.db import transaction
                from app.helpers import notify
                def place(order):
                    with transaction.atomic():
                        notify(order)
                """,
            "app/helpers.py": "class notify:\n    pass\n",
        }
    )
    assert findings(root) == []  # `notify` is a class there: its module needs no parse
    (root / "app" / "helpers.py").write_text("import requests\n\n\ndef notify(order):\n    requests.post(order)\n")
    assert findings(root) == [
        f"app/views.py:5:9: CRL401 notify() -> requests.post (app/helpers.py:5) {ADVICE}",
    ]


@pytest.mark.parametrize(
    ("data", "may"),
    [
        (b"def notify(x):\n", True),
        (b"async def notify():\n", True),
        (b"from .partners import notify_partner as notify\n", True),
        (b"from .x import (\n    a,\n    notify,\n)\n", True),
        (b"from .x import (a,  # the first\n    b, notify)\n", True),
        (b"from x import a, \\\n    notify\n", True),
        (b"import os; from x import notify\n", True),
        (b"class notify(Exception):\n    pass\n", False),
        (b"notify = Signal()\n", False),
        (b"notifier = 1\ndef notify_all(): pass\n", False),
        # Read at every place the name occurs, not only the first.
        (b"x = notify\nnotify.send()\ndef notify(): pass\n", True),
        (b"y = notify  # notify\nfrom x import (\r\n    a,\r\n    notify,\r\n)\r\n", True),
        (b"def \\\n    notify(): pass\n", True),
        (b"notify()\nx.notify = 1\nundef.notify = 2\n", False),
        (b"import_notify = 1\nnotify_import = notify\n", False),
    ],
)
def test_a_module_is_parsed_when_its_bytes_may_bind_the_function(data: bytes, may: bool) -> None:
    assert may_bind_function(data, "notify") is may


@pytest.mark.parametrize(
    ("data", "may"),
    [
        (b"class notify(Exception):\n", True),
        (b"notify = partial(send)\n", True),
        (b"    notify: Mailer\n", True),
        (b"notify == 1\n", False),
        (b"renotify = 1\nnotify_all = 2\n", False),
        (b"class\t\\\n  notify:\n", True),
        (b"x = 1\n\tnotify \t= 2\n", True),
        (b"(class notify)\n", True),
        (b"notify:", True),
        (b"subclass notify(X): pass\n", False),
        (b"class notifyer: pass\nclass_notify = 1\nclassnotify()\n", False),
        (b"x; notify = 1\n", False),
        (b"# notify = 1\n", False),
        (b"notify \t==2\n", False),
    ],
)
def test_a_module_is_parsed_when_its_bytes_may_bind_a_class_or_value(data: bytes, may: bool) -> None:
    assert may_bind_value(data, "notify") is may
    # What the occurrence scan replaced: one pattern tried at every byte.
    pattern = rb"\bclass\s+notify\b|^[ \t]*notify[ \t]*(?::|=(?!=))"
    assert may is (re.search(pattern, data, re.MULTILINE) is not None or may_bind_function(data, "notify"))


SENDER = "Sender.connect() -> smtplib.SMTP (app/base.py:11)"
PARTNER = "Partner.notify() -> httpx.Client.post (app/partners.py:13)"


def test_methods_of_project_classes_are_followed_across_modules(tmp_path: Path) -> None:
    """Instances constructed, annotated, held as attributes or at module level, base classes in another
    module, partials: each finding names its chain; the calls of `stays_clean` are not findings."""
    root = tmp_path / "clients"
    copy_project(CLIENTS, root)
    assert findings(root, "--no-cache") == [
        f"app/views.py:17:9: CRL401 Mailer.send() -> {SENDER} {ADVICE}",
        f"app/views.py:22:9: CRL401 Mailer.send() -> {SENDER} {ADVICE}",
        f"app/views.py:23:9: CRL401 {PARTNER} {ADVICE}",
        f"app/views.py:28:9: CRL401 {SENDER} {ADVICE}",
        f"app/views.py:29:9: CRL401 {PARTNER} {ADVICE}",
        f"app/views.py:34:9: CRL401 notify() -> {PARTNER} {ADVICE}",
        f"app/views.py:43:9: CRL401 Mailer.send() -> {SENDER} "
        + ADVICE.replace("transaction.atomic()", "@transaction.atomic"),
    ]


@pytest.mark.parametrize(("name", "checked"), [("clients", "app/views.py"), ("enqueues", "shop/views.py")])
def test_flake8_follows_project_classes_and_enqueues_as_the_command_does(
    tmp_path: Path, name: str, checked: str
) -> None:
    root = tmp_path / name
    copy_project(PROJECTS / name, root)
    completed = run_flake8_crl(checked, cwd=root)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == findings(root, "--no-cache")


def test_a_cached_result_follows_the_base_class_it_inherited_from(tmp_path: Path) -> None:
    root = tmp_path / "clients"
    copy_project(CLIENTS, root)
    reached = [line.split(" CRL401 ")[1].split(" inside ")[0] for line in findings(root)]
    assert reached.count("Mailer.send() -> Sender.connect() -> smtplib.SMTP (app/base.py:11)") == 3
    assert len(reached) == 7
    base = root / "app" / "base.py"
    # The base class two modules away stops connecting: the subclass's callers are clean, the rest stays.
    base.write_text(base.read_text().replace("return smtplib.SMTP(self.host, timeout=10)", "return self.host"))
    reached = [line.split(" CRL401 ")[1].split(" inside ")[0] for line in findings(root)]
    assert reached == [
        "Partner.notify() -> httpx.Client.post (app/partners.py:13)",
        "Partner.notify() -> httpx.Client.post (app/partners.py:13)",
        "notify() -> Partner.notify() -> httpx.Client.post (app/partners.py:13)",
    ]


def test_a_helper_walked_once_for_several_files_is_a_dependency_of_each(project) -> None:
    # One run walks `relay` once, for whichever file reaches it first, and serves that answer to the others:
    # each must still depend on every module the walk read, the first file's own module included.
    transaction_calling_relay = """
        from django.db import transaction
        from app.relay import relay
        def place(url):
            with transaction.atomic():
                relay(url)
        """
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/helpers.py": """
                from django.db import transaction
                from app.relay import relay
                def post(url):
                    return url
                def save(url):
                    with transaction.atomic():
                        relay(url)
                """,
            "app/relay.py": "from app.helpers import post\n\n\ndef relay(url):\n    post(url)\n",
            "app/views.py": transaction_calling_relay,
            "app/refunds.py": transaction_calling_relay,
        }
    )
    assert findings(root) == []  # warms the cache
    helpers = root / "app" / "helpers.py"
    helpers.write_text("import requests\n" + helpers.read_text().replace("return url", "return requests.post(url)"))
    chain = "relay() -> post() -> requests.post (app/helpers.py:5)"
    expected = [
        f"app/helpers.py:8:9: CRL401 {chain} {ADVICE}",
        f"app/refunds.py:5:9: CRL401 {chain} {ADVICE}",
        f"app/views.py:5:9: CRL401 {chain} {ADVICE}",
    ]
    assert findings(root) == expected
    assert findings(root, "--no-cache") == expected


@pytest.fixture
def wrappers(tmp_path: Path) -> Path:
    target = tmp_path / "wrappers"
    copy_project(PROJECTS / "wrappers", target)
    return target


def in_helper(where: str, opener: str = "transaction.atomic()") -> str:
    return f"({where}: {opener}); make the call after commit (transaction.on_commit) or outside the transaction"


def test_project_wrappers_are_transaction_scopes_where_they_are_used(wrappers: Path) -> None:
    post = "notify_partner() -> requests.post (app/partners.py:5)"
    assert findings(wrappers, "--no-cache") == [
        f"app/commit.py:26:9: CRL401 requests.post inside local_block() {in_helper('app/commit.py:20')}",
        f"app/views.py:29:9: CRL401 requests.post inside db_transaction() {in_helper('app/db.py:17')}",
        f"app/views.py:34:9: CRL401 {post} inside atomic_block() {in_helper('app/db.py:17')}",
        "app/views.py:39:9: CRL401 requests.post inside session_scope(...) (app/db.py:23: session.begin()); "
        "make the call outside the transaction, after it commits",
        "app/views.py:44:9: CRL401 requests.post inside outer_block() (app/db.py:29: db_transaction() "
        "(app/db.py:17: transaction.atomic())); make the call after commit (transaction.on_commit) or outside the "
        "transaction",
        f"app/views.py:49:9: CRL401 requests.post inside Tx() {in_helper('app/db.py:35')}",
        f"app/views.py:54:5: CRL401 requests.post inside @transactional {in_helper('app/db.py:46')}",
        f"app/views.py:59:5: CRL401 {post} inside @atomic_view {in_helper('app/db.py:53', '@transaction.atomic')}",
        "app/views.py:64:5: CRL401 requests.post inside @atomic_on(...) "
        + in_helper("app/db.py:58", "@transaction.atomic(...)"),
        f"app/views.py:69:5: CRL401 requests.post inside @db_transaction() {in_helper('app/db.py:17')}",
    ]


def test_a_cached_result_follows_the_wrapper_it_used(wrappers: Path) -> None:
    assert len(findings(wrappers)) == 10  # warms the cache
    db = wrappers / "app" / "db.py"
    original = db.read_text()
    # db_transaction now yields after its transaction: its uses (and outer_block's, and the re-export's) are clean.
    db.write_text(original.replace("    with transaction.atomic():\n        yield\n\n\n@acm", "    yield\n\n\n@acm", 1))
    assert [line.split(": CRL401 ")[0] for line in findings(wrappers)] == [
        "app/commit.py:26:9",
        "app/views.py:39:9",
        "app/views.py:49:9",
        "app/views.py:54:5",
        "app/views.py:59:5",
        "app/views.py:64:5",
    ]
    db.write_text(original)
    assert len(findings(wrappers)) == 10


# views.py uses a project context manager that opens no transaction (yet).
GUARDED = {
    "pyproject.toml": "[tool.corral]\n",
    "app/__init__.py": "",
    "app/views.py": """
        import requests
        from app.locks import guarded
        def place(order):
            with guarded():
                requests.post(order, timeout=5)
        """,
    "app/locks.py": "from contextlib import contextmanager\n@contextmanager\ndef guarded():\n    yield\n",
}


@pytest.mark.parametrize("paths", [(), ("app/views.py",)], ids=["the project", "one file"])
def test_a_file_the_prefilter_ruled_out_is_rechecked_when_a_wrapper_appears(project, paths: tuple[str, ...]) -> None:
    root = project(GUARDED)
    assert findings(root) == []  # neither file opens a transaction: views.py is not even parsed
    locks = root / "app" / "locks.py"
    locks.write_text(locks.read_text().replace("    yield", "    with transaction.atomic():\n        yield"))
    locks.write_text("from django.db import transaction\n" + locks.read_text())
    # Checking the one file that uses it, the summary is checked with its cached result; checking the whole
    # project, after the walk, since a file changed.
    assert findings(root, *paths) == [
        f"app/views.py:5:9: CRL401 requests.post inside guarded() {in_helper('app/locks.py:5')}",
    ]


def test_flake8_sees_the_project_wrappers(wrappers: Path) -> None:
    completed = run_flake8_crl("app/views.py", "app/commit.py", cwd=wrappers)
    assert completed.returncode == 1, completed.stderr
    assert sorted(completed.stdout.splitlines()) == findings(wrappers, "--no-cache")


def test_the_pre_pass_names_the_wrappers_and_their_reexports() -> None:
    words = wrapper_words(PROJECTS / "wrappers", modules.project_files(PROJECTS / "wrappers"))
    # Every helper the model accepts, each name it is re-exported as, and the candidates it then rejects.
    assert {"db_transaction", "atomic_block", "session_scope", "outer_block", "Tx", "transactional"} <= words
    assert {"atomic_view", "atomic_on", "local_block"} <= words
    # Nothing that cannot open a transaction: a context manager without one, a class entering nothing, a
    # decorator that only logs.
    assert words.isdisjoint({"no_transaction", "NotTx", "logged", "notify_partner", "pay"})


def test_the_pre_pass_finds_the_same_wrappers_when_no_parsed_module_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # The parse memos keep a bounded amount of source; the pre-pass keeps no module between its rounds and
    # reads one again when a word found later appears in it. With memos that keep nothing it must still
    # find every wrapper (outer_block wraps atomic_block: a second round).
    expected = wrapper_words(PROJECTS / "wrappers", modules.project_files(PROJECTS / "wrappers"))
    modules.forget()
    monkeypatch.setattr(modules, "_PARSED", modules._BoundedMemo(1))
    monkeypatch.setattr(modules, "_BY_TEXT", modules._BoundedMemo(1))
    assert wrapper_words(PROJECTS / "wrappers", modules.project_files(PROJECTS / "wrappers")) == expected


def test_the_pre_pass_parses_only_the_modules_whose_scopes_may_open_a_transaction(
    project, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            # Shaped like a wrapper's module (a decorator returning a function it defines), naming an opener
            # only in a call: no scope opens, no parse.
            "app/logs.py": """
                from django.db import transaction
                def logged(func):
                    def wrapper(*args):
                        kept = transaction.atomic(using="logs")
                        return func(*args, kept)
                    return wrapper
                """,
            # Opening one through an alias of atomic, bound over lines: parsed, and a wrapper.
            "app/db.py": """
                from contextlib import contextmanager
                from django.db import transaction
                tx = (
                    transaction.atomic
                )
                @contextmanager
                def block():
                    with tx():
                        yield
                """,
        }
    )
    parsed: list[str] = []
    read = modules.ProjectModules.file

    def spied(self: modules.ProjectModules, relpath: str) -> modules.ModuleInfo | None:
        parsed.append(relpath)
        return read(self, relpath)

    monkeypatch.setattr(modules.ProjectModules, "file", spied)
    words = wrapper_words(root, modules.project_files(root))
    assert "block" in words and "logged" not in words
    assert set(parsed) == {"app/db.py"}  # read again in the round after `block` was found


def test_the_parse_memo_keeps_the_most_recent_entries_within_its_bound() -> None:
    memo: modules._BoundedMemo[str, int] = modules._BoundedMemo(10)
    memo.put("a", 1, 4)
    memo.put("b", 2, 4)
    assert memo.get("a") == 1  # now the most recent
    memo.put("c", 3, 4)  # 12 > 10: the least recently used goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (1, None, 3)
    memo.put("huge", 4, 100)  # alone over the bound: still kept, the newest
    assert memo.get("huge") == 4 and memo.get("a") is None


@pytest.mark.parametrize(
    "returned",
    [
        "return wrapper",
        "return (\n        wrapper\n    )",
        "return (  # the wrapper\n        wrapper)",
        "return wrapper;",
    ],
)
def test_a_decorator_is_found_however_its_return_is_spelled(project, returned: str) -> None:
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/deco.py": """
                from django.db import transaction
                def in_transaction(func):
                    def wrapper(*args):
                        with transaction.atomic():
                            return func(*args)
                    RETURNED
                """.replace("RETURNED", returned.replace("\n", "\n" + " " * 16)),
            "app/views.py": """
                import requests
                from app.deco import in_transaction
                @in_transaction
                def place(order):
                    requests.post(order, timeout=5)
                """,
        }
    )
    assert findings(root, "--no-cache") == [
        f"app/views.py:5:5: CRL401 requests.post inside @in_transaction {in_helper('app/deco.py:4')}",
    ]


@pytest.fixture
def signals(tmp_path: Path) -> Path:
    target = tmp_path / "signals"
    copy_project(PROJECTS / "signals", target)
    return target


def test_a_signal_sent_inside_a_transaction_is_followed_to_its_receivers(signals: Path) -> None:
    post = "post_json() -> requests.post (app/partners.py:5)"
    assert findings(signals, "--no-cache") == [
        f"app/views.py:13:9: CRL401 order_paid.send() -> notify_partner() (receiver, app/receivers.py:15) -> {post} "
        + ADVICE,
        "app/views.py:18:9: CRL401 events.order_refunded.send_robust() -> refund_partner() (receiver, "
        f"app/receivers.py:34) -> {post} {ADVICE}",
        f"app/views.py:23:9: CRL401 order_viewed.send() -> count_view() (receiver, app/receivers.py:25) -> {post} "
        + ADVICE,
    ]


def test_a_cached_result_follows_the_receivers_it_reached(signals: Path) -> None:
    assert len(findings(signals)) == 3  # warms the cache
    receivers = signals / "app" / "receivers.py"
    original = receivers.read_text()
    # notify_partner now defers its call: views.py's cached finding at the send must not be served.
    receivers.write_text(
        original.replace(
            '    post_json("https://partner.example/paid", {"order": order.pk})',
            '    transaction.on_commit(lambda: post_json("https://partner.example/paid", {"order": order.pk}))',
        )
    )
    assert [line.split(": CRL401 ")[0] for line in findings(signals)] == ["app/views.py:18:9", "app/views.py:23:9"]
    receivers.write_text(original)
    assert len(findings(signals)) == 3


def test_the_pre_pass_stays_fast_on_comments_made_of_hashes(tmp_path: Path) -> None:
    # A comment of many `#`s can be split into comments in exponentially many ways by a careless pattern.
    hashes = "#" * 60
    (tmp_path / "banner.py").write_text(
        f"from django.db import transaction\n\ndef f():\n    return {hashes}\n\ndef g(x):\n    return x.  {hashes}\n"
    )
    started = time.process_time()
    assert wrapper_words(tmp_path, modules.project_files(tmp_path)) == frozenset()
    assert time.process_time() - started < 2


def test_the_cache_spells_the_summary_prefix_as_the_analysis_does() -> None:
    assert cache.SUMMARY_PREFIX == modules.SUMMARY_PREFIX
    assert cache.MISSING == modules.MISSING


def test_flake8_follows_the_signals_too(signals: Path) -> None:
    completed = run_flake8_crl("app/views.py", cwd=signals)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == findings(signals, "--no-cache")


JOB_MODULES = {
    "pyproject.toml": "[tool.corral]\n",
    "app/__init__.py": "",
    "app/queue.py": 'from huey import SqliteHuey\n\nhuey = SqliteHuey("app")\n',
    "app/tasks.py": """
        import dramatiq
        import requests
        from celery import shared_task
        from huey import RedisHuey, crontab
        from huey.contrib.djhuey import db_task
        from rq.decorators import job

        from app.queue import huey as shared_huey

        huey = RedisHuey("app")

        @huey.task()
        def notify(url):
            requests.post(url, timeout=5)

        @huey.periodic_task(crontab(minute="0"))
        def sweep():
            requests.get("https://example.com", timeout=5)

        @db_task()
        def audit(url):
            requests.post(url, timeout=5)

        @shared_huey.task()
        def remote(url):
            requests.post(url, timeout=5)

        @shared_task(time_limit=30)
        def deliver(url):
            requests.post(url, timeout=5)

        @dramatiq.actor(time_limit=30000)
        def push(url):
            requests.post(url, timeout=5)

        @job("default", timeout=30)
        def send(url):
            requests.post(url, timeout=5)

        def ping(url):
            requests.get(url, timeout=5)

        def ping(url):
            return url
        """,
    "app/views.py": """
        from django.db import transaction
        from app.tasks import audit, deliver, notify, ping, push, remote, send, sweep

        def save(url):
            with transaction.atomic():
                notify(url)
                sweep()
                audit(url)
                remote(url)
                ping(url)
                deliver(url)
                push(url)
                send(url)
        """,
}


def test_a_huey_task_call_enqueues_while_celery_dramatiq_and_rq_calls_run_the_body(project) -> None:
    # Calling a Huey task enqueues it (its body runs in a worker); a Celery task, a Dramatiq actor and an RQ
    # `@job` function called directly run their bodies right there. The second `def ping` is the one bound.
    # The Huey calls are CRL402 instead: each enqueues its job inside the transaction.
    root = project(JOB_MODULES)
    post = "requests.post (app/tasks.py:{})"
    early = "inside transaction.atomic(); the task can run before the commit: use transaction.on_commit(...)"
    assert [line for line in findings(root, "--no-cache") if "app/views.py" in line] == [
        f"app/views.py:6:9: CRL402 notify() {early}",
        f"app/views.py:7:9: CRL402 sweep() {early}",
        f"app/views.py:8:9: CRL402 audit() {early}",
        f"app/views.py:9:9: CRL402 remote() {early}",
        f"app/views.py:11:9: CRL401 deliver() -> {post.format(30)} {ADVICE}",
        f"app/views.py:12:9: CRL401 push() -> {post.format(34)} {ADVICE}",
        f"app/views.py:13:9: CRL401 send() -> {post.format(38)} {ADVICE}",
    ]


ENQUEUES = PROJECTS / "enqueues"
EARLY = "the task can run before the commit: use send_receipt.delay_on_commit(...) or transaction.on_commit(...)"


def test_an_enqueue_is_reported_at_the_call_that_reaches_it_with_its_chain(tmp_path: Path) -> None:
    root = tmp_path / "enqueues"
    copy_project(ENQUEUES, root)
    delay = "send_receipt.delay (shop/notify.py:5)"
    assert findings(root, "--no-cache") == [
        f"shop/views.py:10:9: CRL402 send_receipt.delay inside transaction.atomic(); {EARLY}",
        f"shop/views.py:11:9: CRL402 receipt_for() -> {delay} inside transaction.atomic(); {EARLY}",
        f"shop/views.py:12:9: CRL402 Notifier.order_placed() -> receipt_for() -> {delay} inside transaction.atomic(); "
        + EARLY,
        f"shop/views.py:22:9: CRL402 receipt_for() -> {delay} inside unit_of_work() "
        f"(shop/db.py:8: transaction.atomic()); {EARLY}",
    ]
    # The helper stops enqueueing: the cached result of views.py, which depends on it, is not served.
    assert len(findings(root)) == 4
    notify = root / "shop" / "notify.py"
    notify.write_text(notify.read_text().replace("    send_receipt.delay(order.pk)", "    return order"))
    assert [line.split(": CRL")[0] for line in findings(root)] == ["shop/views.py:10:9"]


SIGNAL_ENQUEUES = {
    "pyproject.toml": "[tool.corral]\n",
    "app/__init__.py": "",
    "app/signals.py": """
        import django.dispatch
        order_paid = django.dispatch.Signal()
        order_viewed = django.dispatch.Signal()
        """,
    "app/tasks.py": """
        from celery import shared_task
        @shared_task(time_limit=10)
        def broadcast(order_id):
            return order_id
        """,
    "app/receivers.py": """
        from django.dispatch import receiver
        from app.signals import order_paid, order_viewed
        from app.tasks import broadcast
        @receiver(order_paid)
        def on_paid(sender, **kwargs):
            broadcast.delay(kwargs["pk"])
        @receiver(order_viewed)
        def on_viewed(sender, **kwargs):
            broadcast.delay_on_commit(kwargs["pk"])
        """,
    "app/views.py": """
        from django.db import transaction
        from app.signals import order_paid, order_viewed
        def pay(order):
            with transaction.atomic():
                order_paid.send(sender=None, pk=order.pk)
                order_viewed.send(sender=None, pk=order.pk)
            order_paid.send(sender=None, pk=order.pk)
        """,
}


def test_a_job_a_signal_receiver_enqueues_is_reported_at_the_send_with_the_chain(project) -> None:
    root = project(SIGNAL_ENQUEUES)
    expected = [
        "app/views.py:5:9: CRL402 order_paid.send() -> on_paid() (receiver, app/receivers.py:5) -> broadcast.delay "
        "(app/receivers.py:6) inside transaction.atomic(); the task can run before the commit: use "
        "broadcast.delay_on_commit(...) or transaction.on_commit(...)",
    ]
    assert findings(root, "--no-cache") == expected
    completed = run_flake8_crl("app/views.py", cwd=root)
    assert completed.stdout.splitlines() == expected


def test_flake8_sees_a_new_project_wrapper_past_the_cache(project) -> None:
    root = project(GUARDED)
    assert run_corral("check", cwd=root).returncode == 0  # views.py's result rests on the project's wrappers
    (root / "app" / "locks.py").write_text(
        "from contextlib import contextmanager\nfrom django.db import transaction\n@contextmanager\n"
        "def guarded():\n    with transaction.atomic():\n        yield\n"
    )
    completed = run_flake8_crl("app/views.py", cwd=root)
    assert [line.split(" (")[0] for line in completed.stdout.splitlines()] == [
        "app/views.py:5:9: CRL401 requests.post inside guarded()"
    ], completed.stderr


def test_flake8_trusts_a_stored_project_summary_only_while_every_project_file_keeps_its_stamp(project) -> None:
    root = project(GUARDED)
    # Files written long before the run: what it computed is stored with their stamps.
    hour_ago = time.time() - 3600
    for file in root.rglob("*.py"):
        os.utime(file, (hour_ago, hour_ago))
    assert run_corral("check", cwd=root).returncode == 0
    (cache_file,) = (root / ".corral_cache").glob("results-*.json")
    document = json.loads(cache_file.read_text())
    (name,) = document["summaries"]
    # A stored summary the files' stamps vouch for is taken as it is: one rewritten here, and the record of
    # views.py's result naming it, make a planted finding come back.
    document["summaries"][name][0] = "planted"
    (record,) = [record for record in document["dependencies"] if record[0] == name]
    record[3] = "planted"
    entry = document["files"]["app/views.py"]
    document["files"]["app/views.py"] = [*entry[:3], [[1, 1, "CRL401", "planted in the cache"]], {}, entry[5]]
    cache_file.write_text(json.dumps(document))
    assert run_flake8_crl("app/views.py", cwd=root).stdout.splitlines() == [
        "app/views.py:1:1: CRL401 planted in the cache"
    ]
    # A new project file: the stored summary is not vouched for; computed, it is not the planted one.
    (root / "app" / "more.py").write_text("x = 1\n")
    completed = run_flake8_crl("app/views.py", cwd=root)
    assert (completed.returncode, completed.stdout) == (0, ""), completed.stderr


def test_a_mixin_beside_a_framework_base_written_twice_is_found_in_python_s_order(project) -> None:
    # `Event(Timestamped, FileMixin, models.Model)` with `Timestamped(models.Model)`: Python's order is Event,
    # Timestamped, FileMixin, Model. Each `models.Model` is the same base however often it is written, so C3
    # finds that order (pretalx's PretalxModel) instead of none, and the mixin's method is followed.
    root = project(
        {
            "app/__init__.py": "",
            "app/celery.py": 'from celery import Celery\n\napp = Celery("app", task_time_limit=60)\n',
            "app/tasks.py": "from app.celery import app\n\n\n@app.task\ndef process_image(pk):\n    return pk\n",
            "app/models.py": """
            from django.db import models
            from app.tasks import process_image


            class Timestamped(models.Model):
                pass


            class FileMixin:
                def process_image(self):
                    process_image.apply_async(kwargs={"pk": self.pk})


            class Event(Timestamped, FileMixin, models.Model):
                pass
            """,
            "app/domain.py": """
            from django.db import transaction
            from app.models import Event


            @transaction.atomic
            def annotated(event: Event):
                event.process_image()


            @transaction.atomic
            def made():
                Event().process_image()
            """,
        }
    )
    found = findings(root, "--select", "CRL4")
    assert [line.split(" ", 2)[:2] for line in found] == [
        ["app/domain.py:7:5:", "CRL402"],
        ["app/domain.py:12:5:", "CRL402"],
    ]
    assert "FileMixin.process_image() -> process_image.apply_async (app/models.py:11)" in found[0]
