"""Declarations: :class:`Queue`, the job kinds it registers, and the :class:`JobContext` a job receives.

Declarations are plain literal-friendly calls (``Queue("index", max_workers=4, timeout=30)``,
``@index.job("corpus.index")``) so the static gate can read them without importing the code.
Every mistake a declaration can carry is raised here, at import time.

A job kind may be declared on a queue after the :class:`~corral.runtime.Runtime` that works it
exists (queues and runtime in one module, jobs in others): :class:`KindTable` is how the runtime
reads its queues' kinds, live, and :func:`declaring_queue` names the queue of a kind declared on a
queue the runtime does not have.
"""

from __future__ import annotations

import functools
import inspect
import math
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from corral.runtime.enqueueing import Unique, UniqueArg, check_priority, check_unique
from corral.runtime.errors import ConfigError, CorralRuntimeError
from corral.runtime.names import check_name
from corral.runtime.stores.protocol import Enqueued

if TYPE_CHECKING:
    from corral.runtime.runtime import Runtime

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "IN_PROCESS",
    "ISOLATIONS",
    "PROCESS",
    "JobContext",
    "JobKind",
    "KindTable",
    "Queue",
    "declaring_queue",
]

DEFAULT_MAX_ATTEMPTS = 5
# How an attempt's code is run. PROCESS: in a child process of the runtime's pool, killed at its
# timeout (the default of `def` jobs). IN_PROCESS: in the runtime's process, an async job as a task on
# its event loop, a sync job in a thread of its own (the default of `async def` jobs).
PROCESS = "process"
IN_PROCESS = "in-process"
ISOLATIONS = (PROCESS, IN_PROCESS)
F = TypeVar("F", bound=Callable[..., Any])

# The queue that last declared each kind name, for the error of a kind declared on a queue no runtime
# of this process was given; weak, so a queue nobody holds any more is forgotten.
_DECLARING_QUEUES: weakref.WeakValueDictionary[str, Queue] = weakref.WeakValueDictionary()


def _check_timeout(what: str, timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ConfigError(f"{what}: timeout must be a number of seconds, got {timeout!r}")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"{what}: timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _check_isolation(what: str, isolation: str | None) -> str | None:
    if isolation is not None and isolation not in ISOLATIONS:
        raise ConfigError(
            f"{what}: isolation must be one of {', '.join(map(repr, ISOLATIONS))} (or None for the default), "
            f"got {isolation!r}"
        )
    return isolation


def _check_positive_int(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be an integer >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class KeywordShape:
    """Which keyword arguments a job function takes after its context (its first parameter, ``context``):
    ``accepted`` names (any other name too with ``**kwargs``: ``any_name``) and the ``required`` ones (no
    default)."""

    context: str
    accepted: frozenset[str]
    required: frozenset[str]
    any_name: bool

    @classmethod
    def of(cls, signature: inspect.Signature) -> KeywordShape | None:
        """The shape of a signature whose parameters after the first are keyword-able, else None."""
        accepted: set[str] = set()
        required: set[str] = set()
        any_name = False
        context, *parameters = signature.parameters.values()
        for parameter in parameters:
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                any_name = True
            elif parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                accepted.add(parameter.name)
                if parameter.default is inspect.Parameter.empty:
                    required.add(parameter.name)
            else:
                return None  # *args or a positional-only parameter: Signature.bind decides
        return cls(context.name, frozenset(accepted), frozenset(required), any_name)

    def fits(self, names: Collection[str]) -> bool:
        """Whether a call with these keyword names binds (False: ``Signature.bind`` says why not)."""
        if not self.required.issubset(names):
            return False
        if self.any_name:
            return self.context not in names
        return self.accepted.issuperset(names)


@dataclass(frozen=True)
class JobKind:
    """One registered job kind: its function and the limits it runs under."""

    name: str
    queue: str
    fn: Callable[..., Any]
    is_async: bool
    timeout: float
    max_attempts: int
    on: tuple[str, ...] = ()
    every: float | None = None
    run_on_start: bool = False
    isolation: str = IN_PROCESS
    priority: int = 0
    """The priority of its jobs when the enqueue gives none (0..3, 3 claimed first)."""
    unique: Unique | None = None
    """Its jobs' ``unique=`` when the enqueue gives none."""
    signature: inspect.Signature = field(repr=False, compare=False, default=inspect.Signature())
    keywords: KeywordShape | None = field(repr=False, compare=False, default=None)
    """The keyword arguments the function takes after its context, when that alone says which calls fit
    (no ``*args``, no positional-only parameters): the enqueue path checks them without ``Signature.bind``."""

    @functools.cached_property
    def lease_seconds(self) -> float:
        """How long a claim (and a per-key lease) outlives the job's start.

        Longer than the timeout, so a live worker always settles a job before its lease ends,
        while a crashed worker's lease still expires on its own.
        """
        return self.timeout + max(1.0, self.timeout / 3)


class Queue:
    """A named queue with its own worker limit; job kinds registered on it inherit its timeout.

    ``max_workers`` bounds how many of its jobs run at once in one process. ``per_key=N`` allows
    at most N jobs with the same ``key`` in flight across every process sharing the store.
    ``poll`` is how often (seconds) an idle worker looks for jobs enqueued by other processes;
    jobs enqueued by the same process wake it at once. ``isolation`` is the default of its kinds
    (``"process"`` or ``"in-process"``); None: ``"process"`` for ``def`` jobs, ``"in-process"`` for
    ``async def`` jobs.
    """

    def __init__(
        self,
        name: str,
        /,
        *,
        max_workers: int,
        timeout: float | None = None,
        per_key: int | None = None,
        poll: float = 1.0,
        isolation: str | None = None,
    ) -> None:
        self.name = check_name("queue", name)
        self.isolation = _check_isolation(f"queue {name!r}", isolation)
        self.max_workers = _check_positive_int(f"queue {name!r}: max_workers", max_workers)
        self.timeout = _check_timeout(f"queue {name!r}", timeout)
        self.per_key = None if per_key is None else _check_positive_int(f"queue {name!r}: per_key", per_key)
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll <= 60:
            raise ConfigError(f"queue {name!r}: poll must be in (0, 60] seconds, got {poll!r}")
        self.poll = float(poll)
        self._kinds: dict[str, JobKind] = {}

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, max_workers={self.max_workers}, timeout={self.timeout}, per_key={self.per_key})"

    @property
    def kinds(self) -> dict[str, JobKind]:
        """The job kinds declared on this queue, by name."""
        return dict(self._kinds)

    def job(
        self,
        name: str,
        /,
        *,
        timeout: float | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on: str | Sequence[str] | None = None,
        isolation: str | None = None,
        priority: int = 0,
        unique: UniqueArg | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as job kind ``name``; ``on`` subscribes it to event topics;
        ``isolation`` overrides the queue's (see :class:`Queue`); ``priority`` and ``unique`` are the
        defaults of its enqueues (see :meth:`Runtime.enqueue <corral.runtime.Runtime.enqueue>`)."""
        topics: tuple[str, ...]
        if on is None:
            topics = ()
        elif isinstance(on, str):
            topics = (check_name("event topic", on),)
        else:
            topics = tuple(check_name("event topic", topic) for topic in on)

        own_priority = check_priority(f"job kind {name!r}", priority, ConfigError)
        own_unique = check_unique(f"job kind {name!r}", unique, ConfigError)

        def register(fn: F) -> F:
            self._register(
                name,
                fn,
                timeout=timeout,
                max_attempts=max_attempts,
                on=topics,
                isolation=isolation,
                priority=own_priority,
                unique=own_unique,
            )
            return fn

        return register

    def periodic(
        self,
        name: str,
        /,
        *,
        every: float,
        timeout: float | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        run_on_start: bool = False,
        isolation: str | None = None,
    ) -> Callable[[F], F]:
        """Register a job kind enqueued every ``every`` seconds by exactly one process sharing the store."""
        checked_every = _check_timeout(f"periodic job {name!r}: every", every)
        if checked_every is None:
            raise ConfigError(f"periodic job {name!r}: every is required")

        def register(fn: F) -> F:
            self._register(
                name,
                fn,
                timeout=timeout,
                max_attempts=max_attempts,
                on=(),
                every=checked_every,
                run_on_start=run_on_start,
                isolation=isolation,
            )
            return fn

        return register

    def _register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        timeout: float | None,
        max_attempts: int,
        on: tuple[str, ...],
        every: float | None = None,
        run_on_start: bool = False,
        isolation: str | None = None,
        priority: int = 0,
        unique: Unique | None = None,
    ) -> None:
        check_name("job kind", name)
        own_isolation = _check_isolation(f"job kind {name!r}", isolation)
        if name in self._kinds:
            raise ConfigError(f"job kind {name!r} is declared twice on queue {self.name!r}")
        if not callable(fn):
            raise ConfigError(f"job kind {name!r}: {fn!r} is not callable")
        own_timeout = _check_timeout(f"job kind {name!r}", timeout)
        effective = own_timeout if own_timeout is not None else self.timeout
        if effective is None:
            raise ConfigError(f"job kind {name!r} has no timeout: give it timeout=... or give queue {self.name!r} one")
        attempts = _check_positive_int(f"job kind {name!r}: max_attempts", max_attempts)
        signature = inspect.signature(fn)
        if not signature.parameters:
            raise ConfigError(f"job kind {name!r}: {fn.__qualname__} must take the JobContext as first argument")
        is_async = inspect.iscoroutinefunction(fn)
        self._kinds[name] = JobKind(
            name=name,
            queue=self.name,
            fn=fn,
            is_async=is_async,
            timeout=effective,
            max_attempts=attempts,
            on=on,
            every=every,
            run_on_start=run_on_start,
            isolation=own_isolation or self.isolation or (IN_PROCESS if is_async else PROCESS),
            priority=priority,
            unique=unique,
            signature=signature,
            keywords=KeywordShape.of(signature),
        )
        _DECLARING_QUEUES[name] = self


def declaring_queue(kind: str) -> Queue | None:
    """The queue that last declared a job kind of this name in this process, if it still exists."""
    return _DECLARING_QUEUES.get(kind)


class KindTable(Mapping[str, JobKind]):
    """The job kinds of ``queues``, read live: a kind declared on one of them later is found too.

    A lookup of a known kind costs one dict lookup; only a miss (or iterating) reads the queues
    again, and then a kind declared on two of them is a :class:`~corral.runtime.ConfigError`.
    """

    def __init__(self, queues: Sequence[Queue]) -> None:
        self._queues = tuple(queues)
        self._kinds: dict[str, JobKind] = {}
        self._read_at = -1
        self._read()

    @property
    def generation(self) -> int:
        """Grows with every kind declared on the queues (kinds are never undeclared)."""
        return sum(len(queue._kinds) for queue in self._queues)

    def _read(self) -> None:
        generation = self.generation
        if generation == self._read_at:
            return
        kinds: dict[str, JobKind] = {}
        for queue in self._queues:
            for name, kind in queue._kinds.items():
                other = kinds.get(name)
                if other is not None:
                    raise ConfigError(f"job kind {name!r} is declared on queue {other.queue!r} and on {queue.name!r}")
                kinds[name] = kind
        self._kinds, self._read_at = kinds, generation

    def __getitem__(self, name: str) -> JobKind:
        kind = self._kinds.get(name)
        if kind is None:
            self._read()
            kind = self._kinds[name]
        return kind

    def __iter__(self) -> Iterator[str]:
        self._read()
        return iter(dict(self._kinds))

    def __len__(self) -> int:
        self._read()
        return len(self._kinds)


class JobContext:
    """What a running job knows about itself, and how it enqueues follow-up work.

    In-process sync jobs run in their own thread and cannot be interrupted: they should check
    :attr:`stop_requested` in long loops and return early when it is set (timeout or shutdown).
    Process-isolated jobs are killed at their timeout instead; their context has no runtime
    (``ctx.enqueue``/``ctx.publish`` raise :class:`~corral.runtime.CorralRuntimeError`).
    """

    __slots__ = ("_runtime", "_stop_requested", "attempt", "job_id", "key", "kind", "max_attempts", "queue")

    def __init__(
        self,
        *,
        runtime: Runtime | None,
        job_id: int,
        kind: str,
        queue: str,
        attempt: int,
        max_attempts: int,
        key: str | None,
    ) -> None:
        self._runtime = runtime
        # A plain flag, not a threading.Event: the job's thread only reads it (one attribute read is atomic),
        # nothing waits on it, and an Event (a lock and a condition) cost more than the rest of this __init__.
        self._stop_requested = False
        self.job_id = job_id
        self.kind = kind
        self.queue = queue
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.key = key

    def __repr__(self) -> str:
        return f"JobContext(job_id={self.job_id}, kind={self.kind!r}, attempt={self.attempt}/{self.max_attempts})"

    @property
    def stop_requested(self) -> bool:
        """True once the job's timeout expired, its job was cancelled, or the runtime is stopping hard."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Ask the job to stop (set by the runtime; a sync job polls :attr:`stop_requested`)."""
        self._stop_requested = True

    def enqueue(
        self,
        kind: str,
        /,
        *,
        key: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: UniqueArg | None = None,
        **args: Any,
    ) -> Awaitable[Enqueued]:
        """Enqueue a follow-up job (async jobs only: ``await ctx.enqueue(...)``)."""
        runtime = self._running_runtime("enqueue")
        return runtime.enqueue(kind, key=key, delay=delay, priority=priority, unique=unique, **args)

    def publish(self, topic: str, payload: dict[str, Any]) -> Awaitable[int]:
        """Publish an event through the outbox (async jobs only)."""
        return self._running_runtime("publish").publish(topic, payload)

    def _running_runtime(self, call: str) -> Runtime:
        if self._runtime is None:
            raise CorralRuntimeError(
                f"ctx.{call}() is not available in a job running isolation='process' (its code runs in a child "
                "process): return what to do as the result, or declare the kind isolation='in-process'"
            )
        return self._runtime
