"""Threads: the single store thread that serialises blocking SQLite calls, one thread per sync job, and
the thread that delivers the runtime's events to their hooks.

All are daemon threads on purpose: Python cannot kill a thread, so a sync job that
overruns its timeout must not keep the process from exiting once the runtime has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["DeliveryThread", "StoreThread", "run_in_thread"]

T = TypeVar("T")


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():  # the awaiting side was cancelled; nobody wants the answer
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def _post(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    # RuntimeError: the loop is closed, the process is shutting down and the answer has no reader
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, fut, result, error)


def run_in_thread(fn: Callable[..., T], /, *args: Any, name: str) -> asyncio.Future[T]:
    """Run ``fn(*args)`` in a new daemon thread; the returned future settles when it returns."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            _post(loop, fut, None, exc)
        else:
            _post(loop, fut, result, None)

    threading.Thread(target=target, name=name, daemon=True).start()
    return fut


_STOP = object()


class StoreThread:
    """One dedicated thread that runs blocking store calls in submission order.

    A single thread keeps the SQLite connection single-threaded and turns the store into a
    serial pipeline, which is what SQLite's one-writer model wants anyway.
    """

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` on the store thread and return its result (or raise its exception)."""
        if self._thread is None:
            raise RuntimeError(f"{self._name} is not running")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._inbox.put((fn, loop, fut))
        return await fut

    async def stop(self) -> None:
        """Let queued calls finish, then end the thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            self._inbox.put((_STOP, loop, fut))
            await fut

    def _serve(self) -> None:
        while True:
            fn, loop, fut = self._inbox.get()
            if fn is _STOP:
                _post(loop, fut, None, None)
                return
            try:
                result = fn()
            except BaseException as exc:
                _post(loop, fut, None, exc)
            else:
                _post(loop, fut, result, None)


@dataclass(frozen=True)
class _StopDelivery:
    """The last item of a :class:`DeliveryThread`: ``done`` settles (on ``loop``) once all before it were delivered."""

    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]


class DeliveryThread:
    """One daemon thread that hands items to ``deliver`` in order, off the event loop, so a slow receiver
    never holds the loop. At most ``capacity`` items wait: :meth:`post` refuses the next one (returns
    False) instead of letting a receiver that cannot keep up grow the process's memory without bound."""

    def __init__(self, deliver: Callable[[Any], None], *, name: str, capacity: int) -> None:
        self._deliver = deliver
        self._name = name
        self._inbox: queue.Queue[Any] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()

    def post(self, item: Any) -> bool:
        """Queue ``item`` for delivery; False when ``capacity`` items already wait."""
        try:
            self._inbox.put_nowait(item)
        except queue.Full:
            return False
        return True

    async def stop(self, *, timeout: float) -> bool:
        """Deliver what is queued, waiting ``timeout`` seconds at most; return whether all of it was
        delivered (else the thread is left to finish, or to die with the process)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._inbox.put(_StopDelivery(loop, done))  # blocking put: the stop marker is never refused
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _serve(self) -> None:
        while True:
            item = self._inbox.get()
            if isinstance(item, _StopDelivery):
                _post(item.loop, item.done, None, None)
                return
            self._deliver(item)
