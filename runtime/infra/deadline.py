"""The overdue-stop thread: ends the process when a worker's stop has run past its deadline.

A worker's stop runs on its event loop, and job code that holds the loop (``time.sleep`` in async
code, a sync driver) holds the stop with it: the grace the worker promises would become however long
that code runs. This thread needs no loop. It is started with the worker and sleeps; once
:meth:`OverdueExit.arm` is called (from a signal handler: it only sets an event), it asks
``overdue`` a few times a second, and when that names a reason it calls ``before_exit`` (which puts
the process's jobs back) and ends the process with ``os._exit``: Python cannot stop the holder of
the loop any other way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["OverdueExit"]

log = logging.getLogger("corral.runtime")

# How often an armed thread asks whether the stop is overdue (seconds).
LOOK_EVERY = 0.1


class OverdueExit:
    """A daemon thread that ends the process with ``code`` once ``overdue()`` returns a reason."""

    def __init__(self, *, overdue: Callable[[], str | None], before_exit: Callable[[str], None], code: int) -> None:
        self._overdue = overdue
        self._before_exit = before_exit
        self._code = code
        self._armed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="corral-overdue-exit", daemon=True)

    def start(self) -> None:
        """Start the (sleeping) thread: before any signal, so that a signal handler never starts a thread."""
        self._thread.start()

    def arm(self) -> None:
        """Begin asking ``overdue``; safe from a signal handler (the thread is already running)."""
        self._armed.set()

    def _watch(self) -> None:
        self._armed.wait()
        while (reason := self._overdue()) is None:
            time.sleep(LOOK_EVERY)
        try:
            self._before_exit(reason)
        except Exception:  # the process must end all the same; what was not put back is rescued later
            log.exception("stop overdue: putting this process's jobs back failed")
        for stream in (sys.stderr, sys.stdout):
            with contextlib.suppress(Exception):  # a closed or broken stream: nothing more can be said
                stream.flush()
        os._exit(self._code)
