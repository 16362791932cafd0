"""The runtime's life cycle: one :class:`State`, the transitions allowed between states, and what each allows.

Owns the only mutable record of where a runtime is between ``start()`` and the end of ``stop()``.
The services do not keep flags of their own: each loop asks the :class:`Lifecycle` whether its
phase is still on. Loops end on these answers *and* on cancellation: on Python < 3.12 a
cancellation racing a result inside ``asyncio.wait_for`` (used by psycopg_pool while a connection
is handed over) is swallowed, and a loop that only relied on it would never end.
"""

from __future__ import annotations

import asyncio
import enum

from corral.runtime.errors import CorralRuntimeError

__all__ = ["Lifecycle", "State"]


class State(enum.Enum):
    """Where a runtime is. ``stop()`` walks the stopping states in order; each ends one kind of work."""

    CREATED = "created"  # built; start() not called yet, or it failed (it may be called again)
    STARTING = "starting"  # start(): boot check, migration, opening the store
    RUNNING = "running"  # every service works; enqueue/publish/wait/counts are allowed
    STOPPING = "stopping"  # stop() began: the relay ends first, queues still claim
    DRAINING = "draining"  # no more claims; running jobs get up to `grace` to finish (soft stop)
    CANCELLING = "cancelling"  # grace elapsed: the jobs left are cancelled and released (hard stop)
    CLOSING = "closing"  # notifier, rescuer and periodic loops end; completions flush; waiters answered
    STOPPED = "stopped"  # the store is closed; a runtime never starts twice


_NEXT: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.STARTING}),
    State.STARTING: frozenset({State.RUNNING, State.CREATED}),
    State.RUNNING: frozenset({State.STOPPING}),
    State.STOPPING: frozenset({State.DRAINING}),
    State.DRAINING: frozenset({State.CANCELLING, State.CLOSING}),  # CANCELLING only when jobs outlive grace
    State.CANCELLING: frozenset({State.CLOSING}),
    State.CLOSING: frozenset({State.STOPPED}),
    State.STOPPED: frozenset(),
}

_CLAIMING = frozenset({State.RUNNING, State.STOPPING})
_PLUMBING = frozenset({State.RUNNING, State.STOPPING, State.DRAINING, State.CANCELLING})
# From the hard stop on, a job's cancellation comes from stop(), never from the job: CLOSING and
# STOPPED are included because a job that ignores its cancellation may still end after them.
_HARD_STOPPED = frozenset({State.CANCELLING, State.CLOSING, State.STOPPED})


class Lifecycle:
    """The state of one runtime and the one place its transitions are checked."""

    def __init__(self) -> None:
        self._state = State.CREATED

    @property
    def state(self) -> State:
        return self._state

    def enter(self, state: State) -> None:
        """Move to ``state``; a transition the table does not allow is a bug of the runtime."""
        if state not in _NEXT[self._state]:
            raise CorralRuntimeError(f"a runtime cannot go from {self._state.value} to {state.value}")
        self._state = state

    def require_running(self) -> None:
        """Raise unless the runtime is running (what enqueue, publish, wait and the inspections need)."""
        if self._state is not State.RUNNING:
            raise CorralRuntimeError("the runtime is not running: use `async with runtime:` or `await runtime.start()`")

    @property
    def relaying(self) -> bool:
        """The relay loops run: stop() ends them first, so no new jobs appear while queues drain."""
        return self._state is State.RUNNING

    @property
    def claiming(self) -> bool:
        """The queues' claim loops run."""
        return self._state in _CLAIMING

    @property
    def plumbing(self) -> bool:
        """The notifier, rescuer and periodic loops run (until running jobs are settled)."""
        return self._state in _PLUMBING

    async def pause_plumbing(self, seconds: float) -> None:
        """Sleep up to ``seconds`` while the plumbing loops run, waking at least once a second to look.

        A maintenance loop's stop is its cancellation, and a driver may swallow a cancellation that races
        its own result (psycopg_pool before Python 3.12): a loop asleep for its whole interval (the
        pruner's ten minutes) would then hold ``stop()`` that long. Looking every second bounds it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self.plumbing and (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(left, 1.0))

    @property
    def hard_stopping(self) -> bool:
        """A running job's cancellation is the hard stop's: release the job instead of failing it."""
        return self._state in _HARD_STOPPED
