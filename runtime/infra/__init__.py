"""The runtime's plumbing: the only place in ``corral.runtime`` that creates tasks, threads and processes.

The project's gate forbids ``asyncio.create_task``, ``threading.Thread``, executors and friends
everywhere else, so every background task and thread the runtime owns is created here, by a
function whose name says who owns it and how it ends.
"""

from corral.runtime.infra.deadline import OverdueExit
from corral.runtime.infra.processes import (
    EXIT_PAST_DEADLINE,
    ChildExit,
    ProcessAttempt,
    ProcessPool,
    StartMethod,
    default_start_method,
    describe_exit,
)
from corral.runtime.infra.tasks import cancel_detached, detach, spawn, wait_event, wait_tasks_or_event
from corral.runtime.infra.threads import DeliveryThread, StoreThread, run_in_thread
from corral.runtime.infra.watchdog import LoopWatchdog

__all__ = [
    "EXIT_PAST_DEADLINE",
    "ChildExit",
    "DeliveryThread",
    "LoopWatchdog",
    "OverdueExit",
    "ProcessAttempt",
    "ProcessPool",
    "StartMethod",
    "StoreThread",
    "cancel_detached",
    "default_start_method",
    "describe_exit",
    "detach",
    "run_in_thread",
    "spawn",
    "wait_event",
    "wait_tasks_or_event",
]
