"""RuntimeConfig: every knob of ``Runtime(...)`` in one frozen, validated value.

Owns the defaults, the units and the validation of the runtime's settings, and the snapshot of
the declarations (queues and their job kinds) the runtime works with. The store is not a field:
it is a resource (a URL to open, or a live :class:`~corral.runtime.stores.protocol.Store` with its own pool)
that the runtime opens or adopts, not a setting to validate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from corral.runtime.declarations import JobKind, KindTable, Queue
from corral.runtime.errors import ConfigError
from corral.runtime.events import EventHook, check_hooks
from corral.runtime.includes import check_modules

__all__ = ["RuntimeConfig"]


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig:
    """The settings of one :class:`~corral.runtime.Runtime`; ``Runtime(...)`` builds one from its keywords.

    Building it checks every field and raises :class:`~corral.runtime.ConfigError` on the first
    bad one. Durations are seconds (floats), counts are integers.
    """

    queues: Sequence[Queue]
    """The queues this runtime knows (and may work). ``kinds`` holds their job kinds as declared now; the
    runtime itself reads them live (:class:`~corral.runtime.declarations.KindTable`), so kinds declared
    later are known to it too."""

    include: Sequence[str] = ()
    """Dotted names of the modules that declare job kinds on these queues (``["app.jobs", "app.email_jobs"]``),
    imported by ``start()`` before anything is claimed: the usual layout declares the jobs in modules that
    import the queues from the runtime's module, which a worker started on that module alone never imports."""

    max_conns: int = 40
    """Connections the store may use (the pool's ``max_size`` for PostgreSQL); the boot check's budget."""

    relay: int = 1
    """Relay loops (outbox -> jobs) this process runs; each counts as one connection in the budget."""

    reserve: float = 0.5
    """Share (0, 1] of ``max_conns`` that workers plus relay may take; the rest stays for requests.
    Checked by the boot check (:func:`~corral.runtime.budget.compute_budget`), not here."""

    grace: float = 20.0
    """Seconds ``stop()`` lets running jobs finish before cancelling them (soft, then hard stop)."""

    max_waiters: int = 64
    """Concurrent ``wait()`` callers per queue; beyond it ``wait()`` answers at once with ``waited=False``."""

    relay_batch: int = 200
    """Outbox rows one relay pass moves at most (one short transaction)."""

    relay_interval: float = 0.2
    """Seconds an idle relay waits between passes (a local ``publish`` or a pushed notice wakes it)."""

    rescue_interval: float = 5.0
    """Seconds between rescuer passes (running jobs whose lease expired become retryable)."""

    notify_interval: float = 0.05
    """Seconds between the waiters' polls of the store, when the store cannot push notices."""

    hot_poll: float = 0.002
    """Seconds before a queue that just found work looks again (doubling up to the queue's ``poll``)."""

    key_busy_snooze: float = 2.0
    """Seconds a job whose ``per_key`` lease is busy is put back, without spending an attempt."""

    unknown_kind_snooze: float = 30.0
    """Seconds (> 0) a claimed job of a kind this process does not know is put back to waiting, without
    spending an attempt, for a process that knows it (or this one, once its module is imported)."""

    retry_base: float = 1.0
    """Seconds of the first retry's backoff step (``retry_base * 2^(attempt-1)``, with jitter)."""

    retry_cap: float = 3600.0
    """Seconds the backoff step never exceeds."""

    keep_done: float = 7 * 86400.0
    """Seconds a done job is kept before the pruner deletes it (default 7 days)."""

    notify_fallback: float = 1.0
    """Seconds between the waiters' polls when the store pushes notices (the fallback for a lost one)."""

    enqueue_timeout: float = 10.0
    """Seconds ``enqueue()`` and ``publish()`` wait for the store at most (> 0); then they raise
    :class:`~corral.runtime.StoreUnavailable` (the job or event may still have been written)."""

    prune_interval: float = 600.0
    """Seconds between pruner passes (done jobs older than ``keep_done`` are deleted); the first runs at start."""

    max_crashes: int = 3
    """Attempts of one job that may crash their worker process (``isolation="process"``: the child died
    without answering) before the job is failed for good as "crashed its worker process N times"."""

    max_retries_requested: int = 25
    """Times one job may ``raise Retry`` (each refunds its attempt); the next request fails the job for good,
    so a job that always asks to run later ends instead of cycling forever."""

    migrate: bool = False
    """Create or upgrade the store's schema at ``start()`` (else run ``corral migrate``)."""

    worker_id: str | None = None
    """How this process signs its claims; None: ``host:pid:random``, made when the runtime is built."""

    on_event: EventHook | Sequence[EventHook] | None = None
    """A callable, or several, each called with every :mod:`~corral.runtime.events` event (a job started,
    succeeded, failed, was retried or snoozed; a rescue; a loop stall), on a thread of their own."""

    hooks: tuple[EventHook, ...] = field(init=False, repr=False, compare=False)
    """``on_event`` as a tuple (empty without hooks)."""

    queues_by_name: Mapping[str, Queue] = field(init=False, repr=False, compare=False)
    """The queues by name, in declaration order."""

    kinds: Mapping[str, JobKind] = field(init=False, repr=False, compare=False)
    """Every job kind of every queue, by name, in declaration order."""

    def __post_init__(self) -> None:
        queues = self.queues
        if isinstance(queues, Queue) or not all(isinstance(q, Queue) for q in queues):
            raise ConfigError("queues must be a sequence of Queue objects")
        by_name: dict[str, Queue] = {}
        for queue in queues:
            if queue.name in by_name:
                raise ConfigError(f"queue {queue.name!r} is declared twice")
            by_name[queue.name] = queue
        kinds = dict(KindTable(queues))
        include = check_modules("include", self.include)
        for label, value in (
            ("max_conns", self.max_conns),
            ("max_waiters", self.max_waiters),
            ("relay_batch", self.relay_batch),
            ("max_crashes", self.max_crashes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{label} must be an integer >= 1, got {value!r}")
        retries = self.max_retries_requested
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"max_retries_requested must be an integer >= 0, got {retries!r}")
        relay = self.relay
        if isinstance(relay, bool) or not isinstance(relay, int) or relay < 0:
            raise ConfigError(f"relay must be an integer >= 0, got {relay!r}")
        for label, seconds in (
            ("grace", self.grace),
            ("relay_interval", self.relay_interval),
            ("rescue_interval", self.rescue_interval),
            ("notify_interval", self.notify_interval),
            ("hot_poll", self.hot_poll),
            ("key_busy_snooze", self.key_busy_snooze),
            ("retry_base", self.retry_base),
            ("retry_cap", self.retry_cap),
            ("keep_done", self.keep_done),
            ("notify_fallback", self.notify_fallback),
        ):
            if not math.isfinite(seconds) or seconds < 0:
                raise ConfigError(f"{label} must be a finite number of seconds >= 0, got {seconds!r}")
        for label, seconds in (
            ("enqueue_timeout", self.enqueue_timeout),
            ("prune_interval", self.prune_interval),
            ("unknown_kind_snooze", self.unknown_kind_snooze),
        ):
            if not math.isfinite(seconds) or seconds <= 0:
                raise ConfigError(f"{label} must be a finite number of seconds > 0, got {seconds!r}")
        # frozen: the derived fields are set once, here, like the validated ones above
        object.__setattr__(self, "queues", tuple(queues))
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "hooks", check_hooks(self.on_event))
        object.__setattr__(self, "queues_by_name", MappingProxyType(by_name))
        object.__setattr__(self, "kinds", MappingProxyType(kinds))
