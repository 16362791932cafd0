"""Child processes for process-isolated job attempts: a pool of supervised workers owned by the runtime.

The only place in ``corral.runtime`` that creates processes. Each child serves one request at a time
over two pipes, one JSON line each way (never pickle), and dies with its parent: it asks the kernel for
SIGKILL when the thread that forked it ends (Linux ``PR_SET_PDEATHSIG``) and a thread of its own
polls ``getppid()`` for every platform. Children ignore SIGINT and SIGTERM: a terminal's Ctrl-C or a
service manager's SIGTERM to the whole group reaches the parent, whose shutdown ends them. An
attempt's child is killed with SIGKILL (its timeout, a hard stop) and reaped before anything calls its
slot free; a dead child is replaced. Start method: ``fork`` on Linux (the child inherits the job
functions), ``spawn`` elsewhere (a fresh interpreter imports them by ``module:qualname``).

What a child does with a request is not this module's business: it runs ``serve(request) -> reply``,
given by the caller (fork: the function itself; spawn: its ``module:qualname``, imported in the child).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal, NoReturn

from corral.runtime.infra.threads import run_in_thread

__all__ = [
    "EXIT_PAST_DEADLINE",
    "ChildExit",
    "ProcessAttempt",
    "ProcessPool",
    "StartMethod",
    "default_start_method",
    "describe_exit",
]

StartMethod = Literal["fork", "spawn"]
Serve = Callable[[dict[str, Any]], dict[str, Any]]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# How often a child checks that its parent still lives (where PR_SET_PDEATHSIG does not exist, and for
# the window between its start and that request).
_PARENT_POLL = 0.5
# The exit status of a child that ended itself because a request ran past its ``end_after``: the parent
# kills a child at its attempt's timeout, but not while job code holds the parent's event loop.
EXIT_PAST_DEADLINE = 86


def default_start_method() -> StartMethod:
    """``fork`` on Linux; ``spawn`` elsewhere (macOS's system libraries are not safe to use after a fork)."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def describe_exit(returncode: int) -> str:
    """``exit code 1`` or ``signal 9 (SIGKILL)``, from a ``subprocess``-style return code."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
    return f"signal {-returncode} ({name})"


def _exited(child: _Child) -> bool:
    """Whether a child has ended, looked at without reaping it (its reaper still collects the exit)."""
    if child.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return False  # a write to its pipe tells, as before
    try:
        return os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class ChildExit(Exception):
    """The child ended before it replied; ``returncode`` as :mod:`subprocess` gives it (< 0: a signal)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(describe_exit(returncode))
        self.returncode = returncode


# -- the child's side --------------------------------------------------------------------------


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL)
        os._exit(1)

    if os.getppid() != parent_pid:  # the parent died before the request above took effect
        os._exit(1)
    threading.Thread(target=watch, name="corral-child-parent-watch", daemon=True).start()


def _flush_output() -> None:
    """Flush what the job printed: the child ends with ``os._exit``, which would drop it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


class _OwnDeadline:
    """The child's own end: a thread that ends the process with :data:`EXIT_PAST_DEADLINE` once the
    request under way has run past the ``end_after`` seconds it came with."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._until: float | None = None
        threading.Thread(target=self._watch, name="corral-child-deadline", daemon=True).start()

    def arm(self, seconds: float | None) -> None:
        with self._changed:
            self._until = None if seconds is None else time.monotonic() + seconds
            self._changed.notify()

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._until is None:
                    self._changed.wait()
                elif (left := self._until - time.monotonic()) > 0:
                    self._changed.wait(left)
                else:
                    _flush_output()
                    os._exit(EXIT_PAST_DEADLINE)


def _serve_forever(requests_fd: int, replies_fd: int, serve: Serve, parent_pid: int) -> None:
    """The child's life: one reply line per request line until the parent closes the pipe or dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(ValueError):  # a forked child would write its signals to the parent's loop
        signal.set_wakeup_fd(-1)
    _die_with_parent(parent_pid)
    deadline = _OwnDeadline()
    with os.fdopen(requests_fd, "rb") as requests, os.fdopen(replies_fd, "wb") as replies:
        for line in requests:
            began = time.monotonic()
            envelope = json.loads(line)
            deadline.arm(envelope["end_after"])
            try:
                reply = serve(envelope["request"])
            except BaseException as exc:  # serve() should not raise; a reply is owed all the same
                reply = {"error": f"the worker process failed to run the job: {type(exc).__name__}: {exc}"}
            deadline.arm(None)
            # How long the request ran here: a parent whose loop was held past the timeout could not kill
            # the child in time, and judges the attempt by this.
            reply["ran"] = time.monotonic() - began
            _flush_output()
            replies.write(json.dumps(reply).encode() + b"\n")
            replies.flush()


def _child_main(requests_fd: int, replies_fd: int, serve: Serve, parent_pid: int) -> NoReturn:
    code = 0
    try:
        _serve_forever(requests_fd, replies_fd, serve, parent_pid)
    except BaseException:
        code = 1
    finally:
        # Never return into the parent's code, nor run its atexit handlers or finalizers.
        os._exit(code)


def spawned_child_main() -> None:
    """Entry of a spawned child: ``argv`` = requests fd, replies fd, parent pid, serve's ``module:qualname``,
    and the parent's ``sys.path`` as JSON (so the child imports what the parent does)."""
    requests_fd, replies_fd, parent_pid = (int(value) for value in sys.argv[1:4])
    module, _, qualname = sys.argv[4].partition(":")
    sys.path[:] = json.loads(sys.argv[5])
    serve: Any = importlib.import_module(module)
    for part in qualname.split("."):
        serve = getattr(serve, part)
    _child_main(requests_fd, replies_fd, serve, parent_pid)


# -- the parent's side -------------------------------------------------------------------------


class _Child:
    """One live child: its pid, the parent's ends of its pipes, and how to reap it."""

    def __init__(self, pid: int, requests_fd: int, replies_fd: int, reap: Callable[[], int], generation: int) -> None:
        self.pid = pid
        self.requests_fd = requests_fd
        self.replies_fd = replies_fd
        self._reap = reap
        self.generation = generation
        self.returncode: int | None = None
        self._reaping: asyncio.Future[int] | None = None
        self.reading = False  # its replies fd is registered with the loop

    def stop_reading(self) -> None:
        if self.reading:
            self.reading = False
            asyncio.get_running_loop().remove_reader(self.replies_fd)

    @property
    def reaping(self) -> bool:
        """Killed or ended, and not reaped yet."""
        return self._reaping is not None and not self._reaping.done()

    def kill(self) -> None:
        if self._reaping is not None and self._reaping.done():
            return  # reaped: its pid may belong to another process by now
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    async def reaped(self) -> int:
        """Wait until the child is really gone (waitpid); its return code. Closes the parent's pipe ends."""
        if self._reaping is None:  # one waitpid per child, however many wait for it
            self._reaping = run_in_thread(self._reap, name=f"corral-reap-{self.pid}")
        returncode = await asyncio.shield(self._reaping)
        if self.returncode is None:
            self.returncode = returncode
            self.stop_reading()  # before the close: the fd number may be reused at once
            for fd in (self.requests_fd, self.replies_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        return returncode


class ProcessAttempt:
    """One request served by one child. :attr:`reply` settles with the child's reply, with
    :class:`ChildExit` when the child ended first, or is cancelled by :meth:`kill`. The attempt owns
    its child until :meth:`kill` or :meth:`finish` returns: the child is then reaped (dead) or back
    in the pool (idle)."""

    def __init__(self, pool: ProcessPool, child: _Child) -> None:
        self._pool = pool
        self._child = child
        loop = asyncio.get_running_loop()
        self.reply: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._exited: asyncio.Task[None] | None = None  # held: the loop keeps only weak references to tasks
        self._buffer = bytearray()
        self._over = False  # finish() or kill() was called: the child is no longer this attempt's to end
        os.set_blocking(child.replies_fd, False)
        loop.add_reader(child.replies_fd, self._readable)
        child.reading = True

    @property
    def pid(self) -> int:
        return self._child.pid

    def _readable(self) -> None:
        try:
            chunk = os.read(self._child.replies_fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # EOF: the child is gone (only it holds the write end)
            self._child.stop_reading()
            self._exited = asyncio.get_running_loop().create_task(
                self._settle_exit(), name=f"corral:reap:{self._child.pid}"
            )
            return
        self._buffer += chunk
        if b"\n" not in chunk:  # only the new bytes are searched: a large result arrives in many chunks
            return
        line, _, rest = self._buffer.partition(b"\n")
        self._child.stop_reading()
        if self.reply.done():
            return
        if rest:  # a child answers once per request: anything more is a broken child, never reused
            self.reply.set_exception(ValueError(f"{len(rest)} bytes after the reply"))
            return
        try:
            self.reply.set_result(json.loads(line))
        except ValueError as exc:
            self.reply.set_exception(exc)

    async def _settle_exit(self) -> None:
        returncode = await self._child.reaped()
        if not self.reply.done():
            self.reply.set_exception(ChildExit(returncode))

    async def kill(self) -> int:
        """SIGKILL the child and wait until it is reaped; its return code. The pool replaces it."""
        self._over = True
        self._child.stop_reading()
        self._child.kill()
        returncode = await self._child.reaped()
        self.reply.cancel()  # the caller killed it: it knows the outcome, no reply will come
        self._pool._replace()
        return returncode

    async def finish(self) -> None:
        """The reply is in: the child goes back to the pool, or, when it ended, is reaped and replaced."""
        self._over = True
        self._child.stop_reading()
        if self.reply.done() and not self.reply.cancelled() and self.reply.exception() is None:
            self._pool._idle_again(self._child)
            return
        self._child.kill()
        await self._child.reaped()
        self._pool._replace()

    async def abandon(self) -> None:
        """The attempt is interrupted (the hard stop): kill the child unless its reply is in (then it goes
        back to the pool); either way return only once the child is reaped or idle."""
        if not self._over:
            if self.reply.done() and not self.reply.cancelled() and self.reply.exception() is None:
                await self.finish()
            else:
                await self.kill()
        elif self._child.reaping:
            await self._child.reaped()  # a kill under way when the interruption came


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ProcessPool:
    """Children that serve requests; :meth:`start` starts some ahead, and a dead one is replaced while
    fewer than that many are alive.

    ``serve`` is what a child runs per request; with ``spawn`` it must be importable by its
    ``module:qualname``. ``generation()`` says how current the parent's job functions are: a forked
    child made before a newer generation (a kind declared since) is retired instead of used.
    """

    def __init__(self, *, serve: Serve, start_method: StartMethod, generation: Callable[[], int] = lambda: 0) -> None:
        self._serve = serve
        self._size = 0
        self._start_method = start_method
        self._generation = generation
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._running = False
        self._retiring: set[asyncio.Task[int]] = set()

    @property
    def pids(self) -> list[int]:
        """Every live child's pid, idle or busy."""
        return [child.pid for child in [*self._idle, *self._busy]]

    def start(self, *, ahead: int) -> None:
        """Start ``ahead`` children now, so the first attempts do not pay for a child's start."""
        self._running = True
        self._size = ahead
        for _ in range(self._size):
            self._idle.append(self._start_child())

    def drain(self) -> None:
        """Start no more children ahead: a child that ends from now on is not replaced (the shutdown)."""
        self._size = 0

    def submit(self, request: Mapping[str, Any], *, end_after: float | None = None) -> ProcessAttempt:
        """Hand ``request`` to an idle child (starting one when none is idle). A child still serving it
        ``end_after`` seconds after it began ends itself (:data:`EXIT_PAST_DEADLINE`), whatever this
        process's event loop does meanwhile."""
        if not self._running:
            raise RuntimeError("the process pool is not running")
        generation = self._generation()
        line = json.dumps({"end_after": end_after, "request": request}).encode() + b"\n"
        while True:
            reused = bool(self._idle)
            child = self._idle.pop() if reused else self._start_child()
            if reused and child.generation != generation and self._start_method == "fork":
                self._retire(child)  # forked before a kind was declared since: it may not know the kind
                continue
            if reused and _exited(child):
                self._retire(child)  # it died while idle, and a write to its pipe may still succeed
                continue
            try:
                _write_all(child.requests_fd, line)
            except OSError:
                if reused:  # it died while idle (the OOM killer, an operator): not this request's crash
                    self._retire(child)
                    continue
                # a fresh child already gone: its exit is this attempt's outcome
            self._busy.add(child)
            return ProcessAttempt(self, child)

    def _idle_again(self, child: _Child) -> None:
        self._busy.discard(child)
        if self._running:
            self._idle.append(child)
        else:
            self._retire(child)

    def _replace(self) -> None:
        self._busy = {child for child in self._busy if child.returncode is None}
        if self._running and len(self._idle) + len(self._busy) < self._size:
            self._idle.append(self._start_child())

    def _retire(self, child: _Child) -> None:
        child.kill()
        task = asyncio.get_running_loop().create_task(child.reaped(), name=f"corral:reap:{child.pid}")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def stop(self) -> None:
        """Kill every child (idle or busy) and wait until each is reaped."""
        self._running = False
        children = [*self._idle, *self._busy]
        self._idle.clear()
        for child in children:
            child.kill()
        await asyncio.gather(*(child.reaped() for child in children), *self._retiring)

    def _start_child(self) -> _Child:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        parent_pid = os.getpid()
        generation = self._generation()
        for stream in (sys.stdout, sys.stderr):  # else the child flushes the parent's pending output again
            with contextlib.suppress(Exception):
                stream.flush()
        if self._start_method == "fork":
            # frozen: the child neither collects the parent's objects (finalizers that would act on
            # the parent's connections) nor touches their pages (copy-on-write stays shared)
            gc.freeze()
            try:
                with warnings.catch_warnings():
                    # Python 3.12+ warns about fork() in a process with threads: the child runs only the
                    # job's code and this module's loop, and never takes a lock another thread held.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:
                    os.close(requests_w)
                    os.close(replies_r)
                    _child_main(requests_r, replies_w, self._serve, parent_pid)  # never returns
            finally:
                gc.unfreeze()  # the parent's; the child's objects stay frozen
            reap: Callable[[], int] = lambda: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])  # noqa: E731
        else:
            serve = f"{self._serve.__module__}:{self._serve.__qualname__}"
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from corral.runtime.infra.processes import spawned_child_main; spawned_child_main()",
                    str(requests_r),
                    str(replies_w),
                    str(parent_pid),
                    serve,
                    json.dumps(sys.path),
                ],
                pass_fds=(requests_r, replies_w),
            )
            pid, reap = process.pid, process.wait
        os.close(requests_r)
        os.close(replies_w)
        return _Child(pid, requests_w, replies_r, reap, generation)
