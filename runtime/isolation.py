"""What crosses into a child process for an ``isolation="process"`` attempt, and what the child does with it.

Owns the request (the kind's name, where its function lives, the JSON arguments and the context's
fields) and the reply (the result's JSON, an error text with its traceback, why the result cannot
be stored, or what the job asked for: ``discard`` with its reason, ``retry_after`` seconds), both
plain JSON: nothing is pickled. The child looks its job function up by kind name in the job kinds
it inherited (fork) or imports it by ``module:qualname`` (spawn), runs it (an ``async def`` under
its own event loop), and checks its result as every store will (:mod:`corral.runtime.payloads`),
so an unstorable result fails only its own job. The processes themselves are
:mod:`corral.runtime.infra.processes`'.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from corral.runtime.declarations import JobContext, JobKind
from corral.runtime.errors import Discard, Retry
from corral.runtime.payloads import UnstorableJson, encode_json
from corral.runtime.stores.protocol import ClaimedJob

__all__ = ["child_request", "describe_error", "serve_imported", "serve_inherited"]


def describe_error(exc: BaseException) -> tuple[str, str]:
    """A failed attempt's error text (``Type: message``) and its traceback."""
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ raises still fails its job, with its type
        message = "<str() of the exception failed>"
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def child_request(job: ClaimedJob, kind: JobKind) -> dict[str, Any]:
    """The request for one attempt of ``job``; its arguments stay the JSON text the store holds."""
    return {
        "kind": kind.name,
        "module": kind.fn.__module__,
        "qualname": kind.fn.__qualname__,
        "args": job.args_json,
        "job_id": job.id,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "key": job.key,
    }


def _run(fn: Callable[..., Any], request: Mapping[str, Any]) -> dict[str, Any]:
    ctx = JobContext(
        runtime=None,
        job_id=request["job_id"],
        kind=request["kind"],
        queue=request["queue"],
        attempt=request["attempt"],
        max_attempts=request["max_attempts"],
        key=request["key"],
    )
    try:
        args = json.loads(request["args"])
        result = asyncio.run(fn(ctx, **args)) if inspect.iscoroutinefunction(fn) else fn(ctx, **args)
    except Discard as exc:
        return {"discard": str(exc.reason)}
    except Retry as exc:
        return {"retry_after": exc.after}
    except BaseException as exc:  # SystemExit, KeyboardInterrupt too: a failed attempt, not a dead child
        error, trace = describe_error(exc)
        return {"error": error, "traceback": trace}
    try:
        return {"result": None if result is None else encode_json(result)}
    except UnstorableJson as exc:
        return {"unstorable": str(exc)}


def serve_inherited(kinds: Mapping[str, JobKind], request: dict[str, Any]) -> dict[str, Any]:
    """A forked child's request: the function is the kind's in the tables the child inherited."""
    kind = kinds.get(request["kind"])
    if kind is None:
        return {"error": f"job kind {request['kind']!r} is not declared in the worker process"}
    return _run(kind.fn, request)


def serve_imported(request: dict[str, Any]) -> dict[str, Any]:
    """A spawned child's request: the function is imported by its ``module:qualname``."""
    where = f"{request['module']}:{request['qualname']}"
    try:
        fn: Any = importlib.import_module(request["module"])
        for part in request["qualname"].split("."):
            fn = getattr(fn, part)
    except Exception as exc:
        return {
            "error": f"job kind {request['kind']!r}: cannot import {where} in the worker process "
            f"(isolation='process' with the spawn start method needs a module-level function): "
            f"{type(exc).__name__}: {exc}"
        }
    return _run(fn, request)
