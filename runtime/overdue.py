"""When a ``corral worker``'s stop is overdue, and what the worker does then: :class:`StopDeadline`.

The worker promises to exit at its grace plus about a second (docs/runtime.md, graceful shutdown). Its
stop runs on the event loop, so job code that holds the loop would hold the stop as long as it runs.
A stop signal is therefore also noted here, by the signal handler itself: Python runs it between two
bytecodes of whatever the main thread does, job code holding the loop included. The stop is overdue

- once the grace has ended (or a second signal ended it) while job code has held the loop for a second
  or more: nothing on the loop can cancel or release anything while it does;
- or, whatever the loop does, ``HARD_STOP_WAIT`` plus ``CLOSING_ALLOWANCE`` after the grace ended: the
  stop itself, or the interpreter's exit (a non-daemon thread of job code), hangs.

Then the worker puts back every job it holds, from the overdue thread (their attempts not spent, their
key slots freed, as the hard stop does), says so at ERROR and ends with ``EXIT_OVERDUE``. A job whose
completion was not flushed yet runs again: at least once.
"""

from __future__ import annotations

import logging
import time

from corral.runtime.infra import OverdueExit
from corral.runtime.runtime import HARD_STOP_WAIT, Runtime

__all__ = ["EXIT_OVERDUE", "StopDeadline"]

log = logging.getLogger("corral.runtime")

EXIT_OVERDUE = 3  # the worker's exit status when it ended itself past its stop's deadline
HELD_PAST_GRACE = 1.0  # seconds the loop must be held, once the grace has ended, for the stop to be overdue
CLOSING_ALLOWANCE = 5.0  # seconds a stop may take after its hard stop (completions, children, the store)


class StopDeadline:
    """The deadline of one worker's stop, from its first stop signal; :meth:`start` before any signal."""

    def __init__(self, runtime: Runtime, *, grace: float) -> None:
        self._runtime = runtime
        self._grace = grace
        self._signals: list[float] = []  # when the stop signals came (monotonic); the first two count
        self._thread = OverdueExit(overdue=self.overdue, before_exit=self._put_back, code=EXIT_OVERDUE)

    def start(self) -> None:
        self._thread.start()

    def signalled(self) -> None:
        """A stop signal came: called from the signal handler, so it only notes the time and sets an event."""
        self._signals.append(time.monotonic())
        self._thread.arm()

    def overdue(self) -> str | None:
        """Why the stop is overdue now, or None while it is not (or no stop signal came)."""
        signals = self._signals[:2]
        if not signals:
            return None
        grace_end = signals[0] + self._grace if len(signals) == 1 else min(signals[0] + self._grace, signals[1])
        now = time.monotonic()
        if now < grace_end:
            return None
        ended = "a second signal ended the grace" if grace_end < signals[0] + self._grace else f"grace {self._grace:g}s"
        held = self._runtime.loop_held_seconds()
        if held >= HELD_PAST_GRACE:
            return f"job code has held the event loop for {held:.1f}s and cannot be stopped ({ended})"
        if now >= grace_end + HARD_STOP_WAIT + CLOSING_ALLOWANCE:
            return f"the stop has not ended {now - signals[0]:.1f}s after its signal ({ended})"
        return None

    def _put_back(self, reason: str) -> None:
        try:
            released = self._runtime.release_blocking()
        except Exception as exc:
            log.error(
                "stop overdue: %s; putting this process's jobs back failed (%s): they are rescued once their "
                "leases expire; ending the process now (exit status %d)",
                reason,
                exc,
                EXIT_OVERDUE,
            )
            return
        log.error(
            "stop overdue: %s; put %d job(s) back to waiting, no attempt spent; ending the process now "
            "(exit status %d)",
            reason,
            released,
            EXIT_OVERDUE,
        )
