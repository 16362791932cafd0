"""The ``corral worker``, ``corral jobs``, ``corral migrate`` and ``corral ui`` commands: :func:`worker_main`,
:func:`jobs_main` (counts, list, show, retry, purge; the JSON shapes are :mod:`corral.runtime.operating`'s),
:func:`migrate_main` and :func:`ui_main` (the dashboard, :mod:`corral.runtime.ui`).

The ``corral`` entry point (in ``corral.gates``) dispatches to these; ``python -m
corral.runtime.cli worker|jobs|migrate|ui ...`` runs them directly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import ipaddress
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from types import FrameType
from typing import Any

from corral.runtime.errors import CorralRuntimeError
from corral.runtime.includes import check_modules, describe_import_failure, import_modules
from corral.runtime.operating import (
    FORMAT_VERSION,
    attempt_json,
    counts_json,
    iso_time,
    job_json,
    opened_store,
    parse_duration,
    parse_since,
)
from corral.runtime.overdue import StopDeadline
from corral.runtime.runtime import Runtime
from corral.runtime.stores.protocol import JOB_IDS, STATES, AttemptRecord, JobFilter, JobRecord, Store

__all__ = ["jobs_main", "load_runtime", "migrate_main", "ui_main", "worker_main"]

log = logging.getLogger("corral.runtime")


def load_runtime(target: str) -> Runtime:
    """Import ``MODULE:ATTRIBUTE`` (the current directory is importable) and return the Runtime."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise CorralRuntimeError(f"expected MODULE:RUNTIME (e.g. myapp.jobs:runtime), got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise CorralRuntimeError(f"cannot import {target}: {describe_import_failure(exc)}") from None
        raise CorralRuntimeError(
            f"cannot import {target}: no module named {exc.name!r} in {os.getcwd()} or on sys.path "
            "(run from the project's folder, or set PYTHONPATH)"
        ) from None
    except Exception as exc:
        raise CorralRuntimeError(f"cannot import {target}: {describe_import_failure(exc)}") from None
    found: object = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise CorralRuntimeError(f"{module_name} has no attribute {attribute!r}")
    if not isinstance(found, Runtime):
        raise CorralRuntimeError(f"{target} is a {type(found).__name__}, not a corral.runtime.Runtime")
    return found


def _split_queues(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    return [name for value in values for name in value.split(",") if name]


async def _work(runtime: Runtime, queues: list[str] | None, grace: float | None) -> None:
    stop = asyncio.Event()
    deadline = StopDeadline(runtime, grace=runtime.config.grace if grace is None else grace)
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second stop signal: cancelling the running jobs now (they go back to waiting)")
            runtime.end_grace()
        else:
            log.warning("stopping: running jobs get their grace to finish; signal again to stop at once")
            stop.set()

    def on_signal_anywhere(signum: int, frame: FrameType | None) -> None:
        # Not loop.add_signal_handler: Python runs this in the main thread between two bytecodes, also
        # of job code holding the loop there, so the stop's deadline counts from the signal itself.
        deadline.signalled()
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process is ending anyway
            loop.call_soon_threadsafe(on_signal)

    deadline.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal_anywhere)
    await runtime.start(queues=queues)
    try:
        await stop.wait()
    finally:
        await runtime.stop(grace)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# Seconds the worker's loop gives tasks left after stop() (stuck jobs) to end once cancelled.
LEFTOVER_WAIT = 1.0


def _run_worker(work: Coroutine[Any, Any, None]) -> None:
    """Like ``asyncio.run``, but never waits for a task that ignores its cancellation: ``stop()`` has
    released what such a job held and logged it, and the process exits at its grace as promised
    (``asyncio.run`` would wait for the task forever)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(work)
    finally:
        leftover = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.wait(leftover, timeout=LEFTOVER_WAIT))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def worker_main(argv: list[str]) -> int:
    """``corral worker MODULE:RUNTIME [--include MODULE]... [--queues a,b] [--grace S]``: run a worker until
    SIGTERM/SIGINT (a second one ends the grace at once). The ``--include`` modules (job modules beside the
    runtime's ``include=``) are imported after the runtime's module and before the worker claims anything."""
    parser = argparse.ArgumentParser(prog="corral worker", description="Run a corral job worker process.")
    parser.add_argument(
        "target", metavar="MODULE:RUNTIME", help="where the Runtime object lives, e.g. app.jobs:runtime"
    )
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module that declares job kinds, imported before the worker starts (repeatable)",
    )
    parser.add_argument(
        "--queues", nargs="+", metavar="QUEUE", help="queues to work (comma or space separated; default all)"
    )
    parser.add_argument("--grace", type=float, default=None, help="seconds to let running jobs finish on shutdown")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="logging level (default INFO)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        include = check_modules("--include", args.include)
        runtime = load_runtime(args.target)
        import_modules("--include", include)
        _run_worker(_work(runtime, _split_queues(args.queues), args.grace))
    except CorralRuntimeError as exc:
        print(f"corral worker: {exc}", file=sys.stderr)
        return 2
    return 0


# -- corral jobs ----------------------------------------------------------------------------------

JOB_ACTIONS = ("counts", "list", "show", "retry", "cancel", "purge")


def _argument(parse: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse type from a parser that raises ValueError with its own message."""

    def convert(text: str) -> float:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return int(text)


def _job_id(text: str) -> int:
    if not text.isdigit() or int(text) not in JOB_IDS:
        raise argparse.ArgumentTypeError(f"must be a job id (a whole number from 1 to 2**63 - 1), got {text!r}")
    return int(text)


def _positive_seconds(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError(f"must be more than zero, got {text!r}")
    return seconds


def _jobs_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corral jobs",
        description="Inspect and operate a runtime's jobs. The store is opened as it is, never created; "
        "counts, list and show open it read-only.",
    )
    parser.add_argument(
        "target", metavar="MODULE:RUNTIME", help="where the Runtime object lives, e.g. app.jobs:runtime"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--format", choices=["text", "json"], default="text", help="output format (default text)")
    counts = actions.add_parser("counts", parents=[common], help="job counts per queue and state (the default)")
    counts.add_argument(
        "--watch",
        nargs="?",
        const=2.0,
        type=_argument(_positive_seconds),
        metavar="EVERY",
        help="refresh every EVERY (default 2s) until Ctrl-C; json: one document per line",
    )
    listing = actions.add_parser("list", parents=[common], help="jobs, newest first")
    listing.add_argument("--queue", help="only this queue")
    listing.add_argument("--kind", help="only this job kind")
    listing.add_argument("--state", choices=STATES, help="only jobs in this state")
    listing.add_argument(
        "--since",
        type=_argument(lambda text: parse_since(text, now=time.time())),
        metavar="WHEN",
        help="only jobs enqueued since WHEN: a duration ago (1h, 2d) or an ISO-8601 time (UTC unless it says)",
    )
    listing.add_argument("--limit", type=_positive_int, default=50, help="at most this many (default 50)")
    show = actions.add_parser("show", parents=[common], help="one job: arguments, result, every attempt")
    show.add_argument("id", type=_job_id, metavar="ID")
    retry = actions.add_parser("retry", parents=[common], help="run failed jobs again, with fresh attempts")
    retry.add_argument("ids", nargs="*", type=_job_id, metavar="ID")
    retry.add_argument("--failed", action="store_true", help="every failed job (of --queue)")
    retry.add_argument("--queue", help="with --failed: only this queue")
    cancel = actions.add_parser(
        "cancel", parents=[common], help="cancel jobs: a waiting one never runs, a running one is stopped"
    )
    cancel.add_argument("ids", nargs="+", type=_job_id, metavar="ID")
    purge = actions.add_parser("purge", parents=[common], help="delete finished jobs and their attempts")
    purge.add_argument("--done", action="store_true", help="purge done jobs")
    purge.add_argument("--failed", action="store_true", help="purge failed jobs")
    purge.add_argument("--cancelled", action="store_true", help="purge cancelled jobs")
    purge.add_argument(
        "--older-than",
        required=True,
        type=_argument(parse_duration),
        metavar="AGE",
        help="finished more than AGE ago (7d, 12h, ...)",
    )
    return parser


def _print_json(document: dict[str, Any]) -> None:
    print(json.dumps({"version": FORMAT_VERSION, **document}, indent=2))


def _print_counts(counts: dict[str, dict[str, int]]) -> None:
    width = max([len("queue"), *map(len, counts)])
    print(f"{'queue':<{width}}  " + "  ".join(f"{state:>8}" for state in STATES))
    for name, cells in counts.items():
        print(f"{name:<{width}}  " + "  ".join(f"{cells[state]:>8}" for state in STATES))


def _job_line(job: JobRecord) -> str:
    return (
        f"#{job.id} {job.queue}/{job.kind} attempt {job.attempt}/{job.max_attempts} {job.state} "
        f"enqueued {iso_time(job.enqueued_at)} args={job.args_json}"
    )


def _print_job(job: JobRecord, attempts: list[AttemptRecord]) -> None:
    print(_job_line(job))
    rows = [
        ("key", job.key),
        ("run at", iso_time(job.run_at)),
        ("started", iso_time(job.started_at)),
        ("finished", iso_time(job.finished_at)),
        ("lease until", iso_time(job.lease_until)),
        ("worker", job.worker_id),
        ("crashes", str(job.crashes) if job.crashes else None),
        ("result", job.result_json),
        ("error", job.error),
    ]
    for label, value in rows:
        if value is not None:
            print(f"  {label + ':':<12} {value}")
    print(f"  attempts:    {len(attempts) or 'none ended yet'}")
    for attempt in attempts:
        crashed = ", crashed its worker" if attempt.crashed else ""
        print(
            f"    {attempt.attempt}. {attempt.outcome}{crashed} on {attempt.worker_id or '?'}, "
            f"{iso_time(attempt.started_at)} .. {iso_time(attempt.finished_at)}"
        )
        if attempt.error:
            print(f"       {attempt.error}")
        for line in (attempt.traceback or "").rstrip().splitlines():
            print(f"       | {line}")


async def _counts(runtime: Runtime, store: Store, args: argparse.Namespace) -> int:
    while True:
        counts = counts_json(list(runtime.queues), await store.counts())
        if args.format == "json":
            document = {"version": FORMAT_VERSION, "at": iso_time(time.time()), "queues": counts}
            print(json.dumps(document, indent=None if args.watch else 2), flush=True)
        else:
            if args.watch:
                print("\x1b[H\x1b[2J", end="")  # clear the terminal: the table redraws in place
                print(f"{runtime.store} at {iso_time(time.time())}, every {args.watch:g}s (Ctrl-C ends)")
            _print_counts(counts)
            sys.stdout.flush()
        if not args.watch:
            return 0
        await asyncio.sleep(args.watch)


async def _list(store: Store, args: argparse.Namespace) -> int:
    where = JobFilter(queue=args.queue, kind=args.kind, state=args.state, since=args.since, limit=args.limit)
    jobs = await store.list_jobs(where)
    if args.format == "json":
        _print_json({"jobs": [job_json(job) for job in jobs]})
        return 0
    if not jobs:
        print("no jobs")
    for job in jobs:
        print(_job_line(job))
        if job.error and job.state != "done":
            print(f"    {job.error}")
    return 0


async def _show(store: Store, args: argparse.Namespace) -> int:
    job = await store.job(args.id)
    if job is None:
        print(f"corral jobs: no job #{args.id} in {store}", file=sys.stderr)
        return 1
    attempts = await store.attempts(job.id)
    if args.format == "json":
        _print_json({"job": {**job_json(job), "attempts": [attempt_json(attempt) for attempt in attempts]}})
    else:
        _print_job(job, attempts)
    return 0


async def _retry(store: Store, args: argparse.Namespace) -> int:
    retried = await store.retry_failed(None if args.failed else args.ids, queue=args.queue)
    skipped = [] if args.failed else sorted(set(args.ids) - set(retried))
    if args.format == "json":
        _print_json({"retried": retried, "skipped": skipped})
    else:
        print(f"retried {len(retried)} job(s)" + (": " + ", ".join(f"#{i}" for i in retried) if retried else ""))
        if skipped:
            print(
                "not failed, not found, or its unique key held by another job; left alone: "
                + ", ".join(f"#{i}" for i in skipped)
            )
    return 1 if skipped else 0


async def _cancel(store: Store, args: argparse.Namespace) -> int:
    cancelled = await store.cancel(args.ids)
    left = [job_id for job_id in args.ids if job_id not in cancelled]
    if args.format == "json":
        _print_json({"cancelled": cancelled, "not_cancelled": left})
    else:
        for job_id in cancelled:
            print(f"#{job_id} cancelled")
        for job_id in left:
            print(f"#{job_id} not cancelled: already finished, or no such job")
    return 1 if left else 0


async def _purge(store: Store, args: argparse.Namespace) -> int:
    chosen_states = (("done", args.done), ("failed", args.failed), ("cancelled", args.cancelled))
    states = [state for state, chosen in chosen_states if chosen]
    purged = await store.purge(states=states, older_than=args.older_than)
    before = iso_time(time.time() - args.older_than)
    if args.format == "json":
        _print_json({"purged": purged, "states": states, "finished_before": before})
    else:
        print(f"purged {purged} job(s) ({', '.join(states)}) finished before {before}")
    return 0


_JOB_ACTIONS: dict[str, Callable[..., Coroutine[Any, Any, int]]] = {
    "list": _list,
    "show": _show,
    "retry": _retry,
    "cancel": _cancel,
    "purge": _purge,
}


async def _operate(runtime: Runtime, args: argparse.Namespace) -> int:
    async with opened_store(runtime.store, read_only=args.action in ("counts", "list", "show")) as store:
        if args.action == "counts":
            return await _counts(runtime, store, args)
        return await _JOB_ACTIONS[args.action](store, args)


def jobs_main(argv: list[str]) -> int:
    """``corral jobs MODULE:RUNTIME [counts|list|show|retry|cancel|purge] ...``: inspect and operate the jobs of a
    runtime's store (counts per queue when no action is named). Exit 0 done, 1 a job asked for was not
    there (``show``), not retried (``retry``) or not cancelled (``cancel``: finished already), 2 a usage or
    store error."""
    parser = _jobs_parser()
    if argv and not argv[0].startswith("-") and (len(argv) == 1 or argv[1] not in JOB_ACTIONS):
        argv = [argv[0], "counts", *argv[1:]]
    args = parser.parse_args(argv)
    if args.action == "retry" and bool(args.ids) == args.failed:
        parser.error("retry takes job ids or --failed (one of them)")
    if args.action == "retry" and args.queue is not None and not args.failed:
        parser.error("retry --queue goes with --failed")
    if args.action == "purge" and not (args.done or args.failed or args.cancelled):
        parser.error("purge needs --done, --failed, --cancelled or several of them")
    try:
        runtime = load_runtime(args.target)
        return asyncio.run(_operate(runtime, args))
    except CorralRuntimeError as exc:
        print(f"corral jobs: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0  # --watch ends with Ctrl-C


async def _migrate(runtime: Runtime) -> list[int]:
    try:
        return await runtime.store.migrate()
    finally:
        await runtime.store.close()


def migrate_main(argv: list[str]) -> int:
    """``corral migrate MODULE:RUNTIME``: create or upgrade the store's schema (safe to run again,
    and from several processes at once)."""
    parser = argparse.ArgumentParser(prog="corral migrate", description="Create or upgrade the job store's schema.")
    parser.add_argument(
        "target", metavar="MODULE:RUNTIME", help="where the Runtime object lives, e.g. app.jobs:runtime"
    )
    args = parser.parse_args(argv)
    try:
        runtime = load_runtime(args.target)
        applied = asyncio.run(_migrate(runtime))
    except CorralRuntimeError as exc:
        print(f"corral migrate: {exc}", file=sys.stderr)
        return 2
    if applied:
        print(f"{runtime.store}: applied schema version(s) {', '.join(map(str, applied))}")
    else:
        print(f"{runtime.store}: schema up to date")
    return 0


# -- corral ui ------------------------------------------------------------------------------------

UI_TOKEN_ENV = "CORRAL_UI_TOKEN"


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text!r}")
    return int(text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


async def _serve_dashboard(runtime: Runtime, args: argparse.Namespace) -> None:
    from corral.runtime.infra.webserver import serve_http
    from corral.runtime.ui.app import dashboard_app

    async with opened_store(runtime.store, read_only=args.read_only):
        mode = " (read-only)" if args.read_only else ""
        token = ", token required" if args.auth_token else ""
        print(f"corral ui: {runtime.store} on http://{args.host}:{args.port}/{mode}{token}; Ctrl-C stops", flush=True)
        app = dashboard_app(runtime, read_only=args.read_only, auth_token=args.auth_token)
        await serve_http(app, host=args.host, port=args.port)


def ui_main(argv: list[str]) -> int:
    """``corral ui MODULE:RUNTIME [--host 127.0.0.1] [--port 8765] [--read-only] [--auth-token T]``: serve the
    dashboard of the runtime's store until Ctrl-C. Beyond loopback it needs a token (``--auth-token`` or
    ``CORRAL_UI_TOKEN``), and then every request does."""
    parser = argparse.ArgumentParser(prog="corral ui", description="Serve a web dashboard of a runtime's jobs.")
    parser.add_argument(
        "target", metavar="MODULE:RUNTIME", help="where the Runtime object lives, e.g. app.jobs:runtime"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=_port, default=8765, help="port to bind (default 8765)")
    parser.add_argument(
        "--read-only", action="store_true", help="no retry or purge buttons; the store opened read-only"
    )
    parser.add_argument(
        "--auth-token",
        default=os.environ.get(UI_TOKEN_ENV) or None,
        metavar="TOKEN",
        help=f"a secret every request must carry (default ${UI_TOKEN_ENV}); required beyond loopback",
    )
    args = parser.parse_args(argv)
    if args.auth_token is None and not _is_loopback(args.host):
        parser.error(f"binding {args.host} (beyond loopback) needs --auth-token or {UI_TOKEN_ENV}")
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"corral ui: needs {' and '.join(missing)}: pip install 'corral[ui]'", file=sys.stderr)
        return 2
    try:
        runtime = load_runtime(args.target)
        asyncio.run(_serve_dashboard(runtime, args))
    except CorralRuntimeError as exc:
        print(f"corral ui: {exc}", file=sys.stderr)
        return 2
    return 0


def _dispatch(argv: list[str]) -> int:
    commands = {"worker": worker_main, "jobs": jobs_main, "migrate": migrate_main, "ui": ui_main}
    if not argv or argv[0] not in commands:
        print("usage: python -m corral.runtime.cli {worker,jobs,migrate,ui} ...", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(_dispatch(sys.argv[1:]))
