"""The ``corral worker``, ``corral jobs`` and ``corral migrate`` commands: :func:`worker_main`,
:func:`jobs_main` and :func:`migrate_main`.

The ``corral`` entry point (in ``corral.gates``) dispatches to these; ``python -m
corral.runtime.cli worker|jobs|migrate ...`` runs them directly.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from corral.runtime.errors import CorralRuntimeError
from corral.runtime.includes import check_modules, import_modules
from corral.runtime.runtime import Runtime
from corral.runtime.stores.protocol import STATES

__all__ = ["jobs_main", "load_runtime", "migrate_main", "worker_main"]


def load_runtime(target: str) -> Runtime:
    """Import ``MODULE:ATTRIBUTE`` (the current directory is importable) and return the Runtime."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise CorralRuntimeError(f"expected MODULE:RUNTIME (e.g. myapp.jobs:runtime), got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
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
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await runtime.start(queues=queues)
    try:
        await stop.wait()
    finally:
        await runtime.stop(grace)


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
    SIGTERM/SIGINT. The ``--include`` modules (job modules beside the runtime's ``include=``) are imported
    after the runtime's module and before the worker claims anything."""
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
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        include = check_modules("--include", args.include)
        runtime = load_runtime(args.target)
        import_modules("--include", include)
        _run_worker(_work(runtime, _split_queues(args.queues), args.grace))
    except CorralRuntimeError as exc:
        print(f"corral worker: {exc}", file=sys.stderr)
        return 2
    return 0


async def _inspect(runtime: Runtime, failed: bool, limit: int, as_json: bool) -> None:
    await runtime.store.open()
    try:
        if failed:
            rows = await runtime.store.failed(limit=limit)
            if as_json:
                print(json.dumps([row.__dict__ for row in rows], indent=2))
                return
            if not rows:
                print("no failed jobs")
            for row in rows:
                print(f"#{row.id} {row.queue}/{row.kind} attempt {row.attempt}/{row.max_attempts} args={row.args_json}")
                print(f"    {row.error}")
            return
        found = await runtime.store.counts()
        names = list(dict.fromkeys([*runtime.queues, *sorted(found)]))
        if as_json:
            print(json.dumps({name: found[name].__dict__ if name in found else {} for name in names}, indent=2))
            return
        width = max([len("queue"), *map(len, names)])
        print(f"{'queue':<{width}}  " + "  ".join(f"{state:>8}" for state in STATES))
        for name in names:
            counts = found.get(name)
            cells = [getattr(counts, state) if counts else 0 for state in STATES]
            print(f"{name:<{width}}  " + "  ".join(f"{cell:>8}" for cell in cells))
    finally:
        await runtime.store.close()


async def _cancel(runtime: Runtime, job_ids: list[int]) -> list[int]:
    await runtime.store.open()
    try:
        return await runtime.store.cancel(job_ids)
    finally:
        await runtime.store.close()


def _cancel_main(argv: list[str]) -> int:
    """``corral jobs MODULE:RUNTIME cancel ID...``: exit 0 when every job was cancelled, 1 when some were
    already finished or unknown, 2 on a usage or store error."""
    parser = argparse.ArgumentParser(
        prog="corral jobs MODULE:RUNTIME cancel",
        description="Cancel jobs: a waiting one never runs, a running one is stopped by its worker.",
    )
    parser.add_argument("ids", metavar="ID", type=int, nargs="+", help="the ids of the jobs to cancel")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    target, args = argv[0], parser.parse_args(argv[2:])
    try:
        cancelled = asyncio.run(_cancel(load_runtime(target), args.ids))
    except CorralRuntimeError as exc:
        print(f"corral jobs cancel: {exc}", file=sys.stderr)
        return 2
    left = [job_id for job_id in args.ids if job_id not in cancelled]
    if args.json:
        print(json.dumps({"cancelled": cancelled, "not_cancelled": left}))
    else:
        for job_id in cancelled:
            print(f"#{job_id} cancelled")
        for job_id in left:
            print(f"#{job_id} not cancelled: already finished, or no such job")
    return 1 if left else 0


def jobs_main(argv: list[str]) -> int:
    """``corral jobs MODULE:RUNTIME [--failed]``: job counts per queue and state, or the failed jobs;
    ``corral jobs MODULE:RUNTIME cancel ID...`` cancels jobs."""
    if len(argv) >= 2 and argv[1] == "cancel":
        return _cancel_main(argv)
    parser = argparse.ArgumentParser(prog="corral jobs", description="Show job counts per queue, or failed jobs.")
    parser.add_argument(
        "target", metavar="MODULE:RUNTIME", help="where the Runtime object lives, e.g. app.jobs:runtime"
    )
    parser.add_argument("--failed", action="store_true", help="list failed jobs with their last error")
    parser.add_argument("--limit", type=int, default=50, help="how many failed jobs to list (default 50)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    try:
        runtime = load_runtime(args.target)
        asyncio.run(_inspect(runtime, args.failed, args.limit, args.json))
    except CorralRuntimeError as exc:
        print(f"corral jobs: {exc}", file=sys.stderr)
        return 2
    return 0


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


def _dispatch(argv: list[str]) -> int:
    commands = {"worker": worker_main, "jobs": jobs_main, "migrate": migrate_main}
    if not argv or argv[0] not in commands:
        print("usage: python -m corral.runtime.cli {worker,jobs,migrate} ...", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(_dispatch(sys.argv[1:]))
