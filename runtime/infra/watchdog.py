"""The event-loop watchdog: a thread that notices when code holds the runtime's event loop.

An async job that calls something blocking (``time.sleep``, a sync driver) stalls every queue of
the process, and no timeout can fire while it does. The loop beats from a small task; the watchdog
thread reads the beat, and when it is older than ``threshold`` it logs at WARNING which task holds
the loop and that task's stack, taken while the stall is under way (afterwards the culprit is gone).
Once the loop beats again, it logs how long the stall lasted and tells ``after_stall`` (on the loop).
Python cannot interrupt the holder: the executor records such a job failed when it ran past its
timeout. Meanwhile nothing on the loop can renew this process's leases, so on every look while the
stall lasts the thread calls ``on_stall`` (the executor renews its attempts' leases from this
thread, on a connection of its own): another process must not rescue work that still runs here.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

__all__ = ["LoopWatchdog"]

log = logging.getLogger("corral.runtime")


class LoopWatchdog:
    """Watches the running loop from :meth:`start` until :meth:`stop`; stalls over ``threshold`` seconds are logged."""

    def __init__(self, *, threshold: float, on_stall: Callable[[], None], after_stall: Callable[[float], None]) -> None:
        self._threshold = threshold
        self._on_stall = on_stall
        self._after_stall = after_stall
        self._beat = time.monotonic()
        self._stopped = threading.Event()
        self._beater: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._beat = time.monotonic()
        self._beater = loop.create_task(self._beat_forever(), name="corral:loop-watchdog")
        self._thread = threading.Thread(
            target=self._watch, args=(loop, threading.get_ident()), name="corral-loop-watchdog", daemon=True
        )
        self._thread.start()

    def held_seconds(self) -> float:
        """How long the loop has been held now, from any thread: 0 while it beats, and before
        :meth:`start` or after :meth:`stop` (no beat is expected then)."""
        if self._beater is None or self._stopped.is_set():
            return 0.0
        return max(0.0, time.monotonic() - self._beat - self._threshold / 4)

    async def stop(self) -> None:
        self._stopped.set()
        if self._beater is not None:
            self._beater.cancel()
            await asyncio.gather(self._beater, return_exceptions=True)

    async def _beat_forever(self) -> None:
        interval = self._threshold / 4
        while True:
            now = time.monotonic()
            lag = now - self._beat - interval
            if lag > self._threshold:
                log.warning(
                    "event loop was held for %.1fs (over %gs); see the warning above for its holder",
                    lag,
                    self._threshold,
                )
                self._after_stall(lag)
            self._beat = now
            await asyncio.sleep(interval)

    def _watch(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        reported = 0.0  # the beat whose stall was reported
        while not self._stopped.wait(self._threshold / 4):
            beat = self._beat
            if time.monotonic() - beat <= self._threshold + self._threshold / 4:
                continue
            if beat != reported:
                reported = beat
                self._report(loop, loop_thread)
            try:
                self._on_stall()
            except Exception:  # the watchdog must outlive any failure of what it calls
                log.exception("loop watchdog: acting on the stall failed")

    def _report(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        """Log which task holds the loop and its stack, read from this thread while the stall lasts."""
        holder = asyncio.current_task(loop)
        frame = sys._current_frames().get(loop_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no stack)\n"
        log.warning(
            "event loop held for over %gs by %s: a blocking call in async code stalls every queue of this "
            "process; its stack:\n%s",
            self._threshold,
            f"task {holder.get_name()!r}" if holder is not None else "code outside any task",
            stack.rstrip(),
        )
