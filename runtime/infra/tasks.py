"""Task ownership: :func:`spawn` for tasks the runtime awaits itself, :func:`detach` for process plumbing.

A detached task is registered per event loop; its exceptions are logged and absorbed, and
:func:`cancel_detached` (called by ``Runtime.stop``) cancels whatever is still running.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine
from typing import Any, TypeAlias, TypeVar

from corral.runtime.infra.threads import run_in_thread

__all__ = ["cancel_detached", "detach", "spawn", "wait_event", "wait_tasks_or_event"]

T = TypeVar("T")
log = logging.getLogger("corral.runtime")

DetachTarget: TypeAlias = Coroutine[Any, Any, Any] | Callable[[], Any]

_detached: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[asyncio.Task[None]]] = weakref.WeakKeyDictionary()


def spawn(coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """Start ``coro`` as a task; the caller keeps the handle and must await or cancel it."""
    return asyncio.get_running_loop().create_task(coro, name=name)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``event``; return whether it is set.

    Not ``asyncio.wait_for``: before Python 3.12 it can turn a cancellation that races its timeout
    into ``TimeoutError``, and a loop that reads TimeoutError as "nothing happened" then never stops
    (seen as a hung ``Runtime.stop()``). ``asyncio.wait`` lets the cancellation through.
    """
    if event.is_set():
        return True
    waiter = asyncio.get_running_loop().create_task(event.wait())
    try:
        await asyncio.wait([waiter], timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()


async def wait_tasks_or_event(
    tasks: Collection[asyncio.Task[Any]], *, timeout: float, event: asyncio.Event
) -> set[asyncio.Task[Any]]:
    """Wait up to ``timeout`` seconds for every one of ``tasks`` to end, or until ``event`` is set, whichever
    comes first; return the tasks still running (``asyncio.wait``, as in :func:`wait_event`)."""
    pending = {task for task in tasks if not task.done()}
    if not pending or event.is_set():
        return pending
    waiter = asyncio.get_running_loop().create_task(event.wait())
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while pending and not event.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            _, still = await asyncio.wait([*pending, waiter], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            pending = {task for task in still if task is not waiter}
    finally:
        waiter.cancel()
    return pending


async def _absorb(work: Awaitable[Any], name: str) -> None:
    try:
        await work
    except asyncio.CancelledError:
        raise
    except BaseException:
        # Plumbing must never take the process down: log with the traceback and carry on.
        log.exception("detached task %r failed", name)


def detach(fn_or_coro: DetachTarget, *, name: str) -> asyncio.Task[None]:
    """Run process plumbing in the background, owned by the runtime.

    ``fn_or_coro`` is a coroutine object, an ``async def`` taking no arguments, or a plain
    function taking no arguments (run in its own daemon thread). Exceptions are logged and
    absorbed; ``Runtime.stop()`` cancels the task if it is still running.
    """
    work: Awaitable[Any]
    if inspect.iscoroutine(fn_or_coro):
        work = fn_or_coro
    elif callable(fn_or_coro):
        if inspect.iscoroutinefunction(fn_or_coro):
            work = fn_or_coro()
        else:
            work = run_in_thread(fn_or_coro, name=f"corral-detach-{name}")
    else:
        raise TypeError(f"detach() needs a coroutine or a callable, got {type(fn_or_coro).__name__}")
    loop = asyncio.get_running_loop()
    task = loop.create_task(_absorb(work, name), name=f"detach:{name}")
    owned = _detached.setdefault(loop, set())
    owned.add(task)
    task.add_done_callback(owned.discard)
    return task


async def cancel_detached(*, timeout: float = 5.0) -> None:
    """Cancel every detached task of the running loop and wait (bounded) for them to end."""
    owned = _detached.get(asyncio.get_running_loop(), set())
    tasks = [task for task in owned if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
