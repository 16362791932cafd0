"""``corral ui``: the dashboard's pages, its CSRF and token checks and read-only mode through Starlette's test
client, the command's refusals, and the whole thing end to end: the real ``corral ui`` and a real worker in
subprocesses, driven by headless Chromium (Debian's ``chromium`` through Playwright), where a failed job is
retried through its button and seen done. Skipped only when Chromium is missing outside CI."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import Cli
from corral.runtime import JobContext, Queue, Runtime
from corral.runtime.stores.protocol import Completion, NewJob
from corral.runtime.stores.sqlite import SqliteStore
from corral.runtime.ui.app import AUTH_COOKIE, dashboard_app
from runtime_helpers import Backend
from starlette.testclient import TestClient

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

queue = Queue("ui", max_workers=3, timeout=20, per_key=1)


@queue.job("ui.step")
async def step(ctx: JobContext, n: int) -> int:
    return n


def _failed_store(path: Path) -> None:
    """A migrated SQLite store with one failed job (#1, two attempts) and one done (#2)."""

    async def main() -> None:
        store = SqliteStore(path=path)
        await store.migrate()
        try:
            keyed = NewJob("ui", "ui.step", '{"n": 1}', "k", time.time(), 2, 30.0)
            await store.enqueue([keyed, NewJob("ui", "ui.step", '{"n": 2}', None, time.time(), 1, 30.0)])
            first, second = await store.claim("ui", 2, "w1")
            await store.fail(first.id, first.token, error="E: <b>one</b>", traceback="tb <one>", retry_at=time.time())
            await store.complete([Completion(second.id, second.token, "2")])
            (again,) = await store.claim("ui", 1, "w2")
            await store.fail(again.id, again.token, error="E: two", traceback="tb two", retry_at=None)
        finally:
            await store.close()

    asyncio.run(main())


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.db"
    _failed_store(path)
    return path


@contextmanager
def _client(path: Path, *, read_only: bool = False, auth_token: str | None = None) -> Iterator[TestClient]:
    """The dashboard app on its store, opened as ``corral ui`` opens it, in the test client's event loop."""
    runtime = Runtime(queues=[queue], store=f"sqlite:///{path}", relay=0)
    with TestClient(dashboard_app(runtime, read_only=read_only, auth_token=auth_token)) as client:
        assert client.portal is not None
        client.portal.call(lambda: runtime.store.open_existing(read_only=read_only))
        try:
            yield client
        finally:
            client.portal.call(runtime.store.close)


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def test_the_main_page_shows_queues_chart_failed_jobs_escaped(store_path: Path) -> None:
    with _client(store_path) as client:
        page = client.get("/")
        assert page.status_code == 200
        html = page.text
        assert '<td class="count failed" data-state="failed">1</td>' in html
        assert '<td class="count done" data-state="done">1</td>' in html
        assert '<td class="count zero" data-state="running">0</td>' in html
        assert "<td>3</td>" in html and "<td>20s</td>" in html  # the queue's limits
        assert html.count('<rect class="done"') == 16  # one bar per minute, the current one too
        assert "E: &lt;b&gt;one&lt;/b&gt;" not in html and "E: two" in html  # the last error, escaped
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert client.get("/static/corral.css").headers["content-type"].startswith("text/css")
        job = client.get("/jobs/1").text
        assert job.count('class="attempt"') == 2 and "E: &lt;b&gt;one&lt;/b&gt;" in job and "tb &lt;one&gt;" in job
        assert client.get("/jobs/99").status_code == 404


def test_actions_need_this_servers_csrf_token(store_path: Path) -> None:
    with _client(store_path) as client:
        token = _csrf(client.get("/").text)
        refused = client.post("/jobs/1/retry", data={"csrf": "forged"}, follow_redirects=False)
        assert refused.status_code == 403 and "form token" in refused.text
        assert client.post("/jobs/1/retry", data={}, follow_redirects=False).status_code == 403
        done = client.post("/jobs/1/retry", data={"csrf": token}, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"].startswith("/jobs/1?said=")
        assert 'data-state="waiting"' in client.get(done.headers["location"]).text
        again = client.post("/jobs/1/retry", data={"csrf": token})
        assert "job #1 is not failed: left alone" in again.text
        bad = client.post("/purge", data={"csrf": token, "done": "1", "older_than": "soon"})
        assert bad.status_code == 400 and "expected a duration" in bad.text
        assert client.post("/purge", data={"csrf": token, "older_than": "1d"}).status_code == 400
        purged = client.post("/purge", data={"csrf": token, "done": "1", "older_than": "0s"})
        assert "purged 1 job(s) (done)" in purged.text
        assert "retried 0 failed job(s)" in client.post("/retry-failed", data={"csrf": token}).text


def test_a_waiting_job_cancelled_through_its_button_never_runs(store_path: Path) -> None:
    with _client(store_path) as client:
        token = _csrf(client.get("/").text)
        assert "/jobs/1/cancel" not in client.get("/jobs/1").text  # failed: nothing to cancel
        client.post("/jobs/1/retry", data={"csrf": token})
        assert 'action="/jobs/1/cancel"' in client.get("/jobs/1").text  # waiting again
        done = client.post("/jobs/1/cancel", data={"csrf": token}, follow_redirects=False)
        assert done.status_code == 303
        page = client.get(done.headers["location"]).text
        assert "job #1 cancelled" in page and 'data-state="cancelled"' in page
        assert "job #1 has finished: left alone" in client.post("/jobs/1/cancel", data={"csrf": token}).text
        too_large = 2**63  # past any store's ids: SQLite's driver raises OverflowError on it
        for job_id in (999, too_large):
            for action in ("retry", "cancel"):
                assert f"no job #{job_id}" in client.post(f"/jobs/{job_id}/{action}", data={"csrf": token}).text
        assert client.get(f"/jobs/{too_large}").status_code == 404
        assert client.post("/jobs/1/cancel", data={"csrf": "forged"}).status_code == 403
        assert '<td class="count cancelled" data-state="cancelled">1</td>' in client.get("/").text
        purged = client.post("/purge", data={"csrf": token, "cancelled": "1", "older_than": "0s"})
        assert "purged 1 job(s) (cancelled)" in purged.text


def test_read_only_shows_no_button_and_refuses_every_action(store_path: Path) -> None:
    with _client(store_path, read_only=True) as client:
        html = client.get("/").text + client.get("/jobs/1").text
        assert "<form" not in html and "read-only" in html
        for path in ("/jobs/1/retry", "/jobs/1/cancel", "/retry-failed", "/purge"):
            assert client.post(path, data={"csrf": "x"}).status_code == 403
        assert 'data-state="failed"' in client.get("/jobs/1").text


def test_with_a_token_every_request_needs_it(store_path: Path) -> None:
    with _client(store_path, auth_token="s3cret") as client:
        assert client.get("/").status_code == 401
        assert client.get("/static/corral.css").status_code == 401
        assert client.get("/?token=wrong").status_code == 401
        assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        traded = client.get("/jobs/1?token=s3cret&x=1", follow_redirects=False)
        assert traded.status_code == 303 and traded.headers["location"] == "/jobs/1?x=1"
        assert (
            "httponly" in traded.headers["set-cookie"].lower()
            and "samesite=strict" in traded.headers["set-cookie"].lower()
        )
        assert client.cookies.get(AUTH_COOKIE) == "s3cret"
        assert client.get("/").status_code == 200  # the cookie carries it now


def test_the_command_refuses_binding_beyond_loopback_without_a_token_and_a_missing_store(
    tmp_path: Path, db: Backend
) -> None:
    cli = Cli(db)
    wide = cli.run("ui", "operateapp:runtime", "--host", "0.0.0.0")
    assert wide.returncode == 2 and "needs --auth-token or CORRAL_UI_TOKEN" in wide.stderr
    port = cli.run("ui", "operateapp:runtime", "--port", "http")
    assert port.returncode == 2 and "must be a port number" in port.stderr
    missing = tmp_path / "nowhere.db"
    result = cli.run("ui", "operateapp:runtime", CORRAL_TEST_STORE=f"sqlite:///{missing}")
    assert result.returncode == 2 and f"no SQLite store at {missing}" in result.stderr
    assert not missing.exists()


# -- end to end in headless Chromium -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the dashboard test: no Chromium at {CHROMIUM} (.ci/run installs it)")
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    return CHROMIUM


@pytest.fixture
def dashboard(cli: Cli) -> Iterator[str]:
    """``corral ui`` on a free loopback port; its URL."""
    port = _free_port()
    server = cli.spawn("ui", "operateapp:runtime", "--port", str(port))
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert f"on http://127.0.0.1:{port}/" in banner, server.communicate(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _listening(port):
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        finally:
            if server.poll() is None:
                server.kill()
            server.communicate()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_ends_the_dashboard_quietly_with_its_store_closed(cli: Cli, stop: signal.Signals) -> None:
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    port = _free_port()
    server = cli.spawn("ui", "operateapp:runtime", "--port", str(port))
    try:
        assert server.stdout is not None
        assert f"on http://127.0.0.1:{port}/" in server.stdout.readline()
        deadline = time.monotonic() + 10
        while not _listening(port):
            assert time.monotonic() < deadline, "the dashboard never listened"
            time.sleep(0.05)
        server.send_signal(stop)
        out, err = server.communicate(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert (server.returncode, err) == (0, ""), out + err


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_failed_job_retried_through_its_button_is_seen_done(
    chromium: str, cli: Cli, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import sync_playwright

    flag = tmp_path / "fail"
    flag.touch()
    assert cli.run("migrate", "operateapp:runtime").returncode == 0
    cli.python("import operateapp; operateapp.settle(ok=3, flaky=2)", CORRAL_TEST_FAIL_FLAG=str(flag))
    flag.unlink()  # from now on the flaky job succeeds
    url = request.getfixturevalue("dashboard")
    worker = cli.start_worker("operateapp:runtime", "--queues", "ops", CORRAL_TEST_FAIL_FLAG=str(flag))
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(url + "/")
                ops = page.locator('tr[data-queue="ops"]')
                assert ops.locator('[data-state="failed"]').inner_text() == "2"
                assert ops.locator('[data-state="done"]').inner_text() == "3"
                assert page.locator("svg.chart rect.done").count() == 16
                failed_rows = page.locator("tr.failed-job")
                assert failed_rows.count() == 2
                assert "RuntimeError: flaky job" in failed_rows.first.inner_text()
                screenshot = tmp_path / "dashboard.png"
                page.screenshot(path=str(screenshot), full_page=True)
                assert screenshot.stat().st_size > 10_000
                print(f"dashboard screenshot: {screenshot}")
                job_id = failed_rows.first.get_attribute("data-job")
                failed_rows.first.get_by_role("button", name="Retry").click()
                page.wait_for_url(re.compile(rf"/jobs/{job_id}\?said="))
                assert f"job #{job_id} retried" in page.locator(".said").inner_text()
                deadline = time.monotonic() + 20
                while page.locator("#job .state").get_attribute("data-state") != "done":
                    assert time.monotonic() < deadline, page.content()
                    time.sleep(0.2)
                    page.reload()
                outcomes = [row.get_attribute("data-outcome") for row in page.locator("tr.attempt").all()]
                assert outcomes == ["retrying", "failed", "done"]
                page.goto(url + "/")
                assert page.locator('tr[data-queue="ops"] [data-state="done"]').inner_text() == "4"
                assert page.locator("tr.failed-job").count() == 1
            finally:
                browser.close()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    shown = json.loads(cli.run("jobs", "operateapp:runtime", "show", str(job_id), "--format", "json").stdout)
    assert shown["job"]["state"] == "done"
