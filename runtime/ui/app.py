"""The dashboard's Starlette app: :func:`dashboard_app` serves a runtime's store as pages and takes the
operator's actions.

Pages (GET): ``/`` (queues with their limits and counts, the attempts that ended per minute, running jobs
against their timeout, held key slots, failed jobs with their error and traceback) and ``/jobs/{id}`` (one
job and every attempt). Actions (POST, each carrying this server's CSRF token, refused in read-only mode):
``/jobs/{id}/retry``, ``/jobs/{id}/cancel``, ``/retry-failed`` and ``/purge``. With an auth token every
request needs it: an ``Authorization: Bearer`` header, or the cookie a visit to ``/?token=...`` sets. Pages
are rendered with
autoescaping jinja2 templates and send a Content-Security-Policy that allows nothing from elsewhere and no
script at all.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from corral.runtime.operating import iso_time, parse_duration
from corral.runtime.runtime import Runtime
from corral.runtime.stores.protocol import FAILED, FINAL_STATES, JOB_IDS, RUNNING, JobFilter, Store
from corral.runtime.ui.views import CHART_HEIGHT, CHART_MINUTES, CHART_WIDTH, queue_rows, running_rows, throughput_bars
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AUTH_COOKIE", "dashboard_app"]

AUTH_COOKIE = "corral_ui_token"
LISTED = 50  # failed and running jobs shown on the main page

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("corral.runtime.ui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_templates.filters["iso"] = iso_time
_STYLESHEET = files("corral.runtime.ui").joinpath("static/corral.css").read_text(encoding="utf-8")


def _same(offered: str | None, expected: str) -> bool:
    return offered is not None and hmac.compare_digest(offered.encode(), expected.encode())


class _TokenGate:
    """Every HTTP request needs the token; ``?token=`` trades it for a cookie (HttpOnly, SameSite=Strict)
    and a redirect to the same page without it, so the token does not stay in the address bar."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        in_query = request.query_params.get("token")
        if _same(in_query, self.token):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response: Response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(AUTH_COOKIE, self.token, httponly=True, samesite="strict")
        else:
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None
            if _same(bearer, self.token) or _same(request.cookies.get(AUTH_COOKIE), self.token):
                await self.app(scope, receive, send)
                return
            response = PlainTextResponse(
                "this dashboard needs its token: open it as /?token=TOKEN or send Authorization: Bearer TOKEN\n",
                status_code=401,
            )
        await response(scope, receive, send)


def dashboard_app(runtime: Runtime, *, read_only: bool, auth_token: str | None) -> ASGIApp:
    """The dashboard of ``runtime``'s store, which the caller has opened as it exists (:func:`opened_store`,
    read-only with ``read_only``, which also leaves every button out and refuses every action)."""
    store = runtime.store
    csrf = secrets.token_urlsafe(32)  # per server: a page from another site cannot read it

    def page(name: str, **context: Any) -> HTMLResponse:
        html = _templates.get_template(name).render(
            store=str(runtime.store), read_only=read_only, csrf=csrf, now=time.time(), **context
        )
        return HTMLResponse(html, headers=_SECURITY_HEADERS)

    async def index(request: Request) -> Response:
        now = time.time()
        running = await store.list_jobs(JobFilter(state=RUNNING, limit=LISTED))
        return page(
            "index.html",
            queues=queue_rows(runtime.queues, await store.counts()),
            bars=throughput_bars(await store.finished_since(now - 60 * (CHART_MINUTES + 1)), now=now),
            chart={"width": CHART_WIDTH, "height": CHART_HEIGHT, "minutes": CHART_MINUTES},
            running=running_rows(running, runtime.kinds, now=now),
            leases=await store.key_leases(),
            failed=await store.list_jobs(JobFilter(state=FAILED, limit=LISTED)),
            said=request.query_params.get("said"),
            refresh=request.query_params.get("refresh", ""),
        )

    async def job_page(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = await store.job(job_id) if job_id in JOB_IDS else None
        if job is None:
            return PlainTextResponse(f"no job #{job_id} in {runtime.store}\n", status_code=404)
        return page("job.html", job=job, attempts=await store.attempts(job_id), said=request.query_params.get("said"))

    def action(handle: Callable[[Request, Store, dict[str, str]], Awaitable[str]]) -> Callable[..., Any]:
        """A POST that changes the store: refused in read-only mode or without this server's CSRF token;
        ``handle`` returns where to go next."""

        async def endpoint(request: Request) -> Response:
            if read_only:
                return PlainTextResponse("this dashboard is read-only (corral ui --read-only)\n", status_code=403)
            form = {key: values[-1] for key, values in parse_qs((await request.body()).decode()).items()}
            if not _same(form.get("csrf"), csrf):
                return PlainTextResponse("missing or stale form token: reload the page and try again\n", 403)
            try:
                target = await handle(request, store, form)
            except ValueError as exc:
                return PlainTextResponse(f"{exc}\n", status_code=400)
            return RedirectResponse(target, status_code=303)

        return endpoint

    async def retry_one(request: Request, store: Store, form: dict[str, str]) -> str:
        job_id = request.path_params["job_id"]
        retried = await store.retry_failed([job_id]) if job_id in JOB_IDS else []
        said = f"job #{job_id} retried" if retried else await left_alone(store, job_id, "is not failed")
        return f"/jobs/{job_id}?{urlencode({'said': said})}"

    async def cancel_one(request: Request, store: Store, form: dict[str, str]) -> str:
        job_id = request.path_params["job_id"]
        cancelled = await store.cancel([job_id]) if job_id in JOB_IDS else []
        said = f"job #{job_id} cancelled" if cancelled else await left_alone(store, job_id, "has finished")
        return f"/jobs/{job_id}?{urlencode({'said': said})}"

    async def left_alone(store: Store, job_id: int, because: str) -> str:
        if job_id not in JOB_IDS or await store.job(job_id) is None:
            return f"no job #{job_id}"
        return f"job #{job_id} {because}: left alone"

    async def retry_failed(request: Request, store: Store, form: dict[str, str]) -> str:
        queue = form.get("queue") or None
        retried = await store.retry_failed(None, queue=queue)
        return "/?" + urlencode({"said": f"retried {len(retried)} failed job(s)"})

    async def purge(request: Request, store: Store, form: dict[str, str]) -> str:
        states = [state for state in FINAL_STATES if form.get(state)]
        if not states:
            raise ValueError(f"purge needs one or more of {', '.join(FINAL_STATES)}")
        older_than = parse_duration(form.get("older_than", ""))
        purged = await store.purge(states=states, older_than=older_than)
        return "/?" + urlencode({"said": f"purged {purged} job(s) ({', '.join(states)}) older than {older_than:g}s"})

    async def stylesheet(request: Request) -> Response:
        return Response(_STYLESHEET, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/jobs/{job_id:int}", job_page),
            Route("/jobs/{job_id:int}/retry", action(retry_one), methods=["POST"]),
            Route("/jobs/{job_id:int}/cancel", action(cancel_one), methods=["POST"]),
            Route("/retry-failed", action(retry_failed), methods=["POST"]),
            Route("/purge", action(purge), methods=["POST"]),
            Route("/static/corral.css", stylesheet),
        ],
    )
    return app if auth_token is None else _TokenGate(app, auth_token)
