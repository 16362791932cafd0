"""Bad input is a clear error at declaration, enqueue or start, and nothing is lost."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from corral.runtime import (
    ConfigError,
    CorralRuntimeError,
    JobArgumentError,
    JobContext,
    Queue,
    Runtime,
    StoreUnavailable,
    UnknownJobKind,
)


async def noop(ctx: JobContext) -> None:
    return None


@pytest.mark.parametrize("name", ["Index", "1index", "", "a b", "a;drop", "x" * 64, "ÿ"])
def test_bad_queue_names(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid queue name"):
        Queue(name, max_workers=1, timeout=1)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_max_workers_must_be_positive_int(workers: object) -> None:
    with pytest.raises(ConfigError, match="max_workers"):
        Queue("q", max_workers=workers, timeout=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [0, -5, float("nan"), float("inf"), "30"])
def test_timeout_must_be_positive(timeout: object) -> None:
    with pytest.raises(ConfigError, match="timeout"):
        Queue("q", max_workers=1, timeout=timeout)  # type: ignore[arg-type]
    queue = Queue("q", max_workers=1, timeout=5)
    with pytest.raises(ConfigError, match="timeout"):
        queue.job("k", timeout=timeout)(noop)  # type: ignore[arg-type]


def test_job_kind_without_any_timeout() -> None:
    queue = Queue("q", max_workers=1)
    with pytest.raises(ConfigError, match="has no timeout"):
        queue.job("k")(noop)
    queue.job("k2", timeout=3)(noop)  # its own timeout is enough
    assert queue.kinds["k2"].timeout == 3.0


def test_kinds_inherit_queue_timeout() -> None:
    queue = Queue("q", max_workers=1, timeout=30)
    queue.job("a")(noop)
    queue.job("b", timeout=600)(noop)
    assert queue.kinds["a"].timeout == 30 and queue.kinds["b"].timeout == 600


def test_duplicate_kind_names() -> None:
    first = Queue("one", max_workers=1, timeout=1)
    first.job("dup")(noop)
    with pytest.raises(ConfigError, match="declared twice"):
        first.job("dup")(noop)
    second = Queue("two", max_workers=1, timeout=1)
    second.job("dup")(noop)
    with pytest.raises(ConfigError, match="declared on queue 'one' and on 'two'"):
        Runtime(queues=[first, second], store="sqlite:///unused.db")


def test_duplicate_queue_names() -> None:
    with pytest.raises(ConfigError, match="declared twice"):
        Runtime(queues=[Queue("q", max_workers=1), Queue("q", max_workers=1)], store="sqlite:///unused.db")


def test_job_must_take_a_context() -> None:
    queue = Queue("q", max_workers=1, timeout=1)

    async def no_args() -> None:
        return None

    with pytest.raises(ConfigError, match="JobContext"):
        queue.job("k")(no_args)


def test_unsupported_store_url() -> None:
    with pytest.raises(StoreUnavailable, match="unsupported store URL"):
        Runtime(queues=[], store="redis://localhost")


def _runtime(db: Path) -> Runtime:
    queue = Queue("q", max_workers=1, timeout=5)

    @queue.job("takes.id")
    async def takes_id(ctx: JobContext, note_id: int) -> None:
        return None

    return Runtime(queues=[queue], store=f"sqlite:///{db}")


def test_enqueue_rejects_unknown_kind_and_non_json(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path / "jobs.db")

    async def main() -> None:
        async with runtime:
            with pytest.raises(UnknownJobKind, match=r"unknown job kind 'nope'; declared kinds: takes\.id"):
                await runtime.enqueue("nope")
            with pytest.raises(JobArgumentError, match=r"argument 'note_id' of job kind 'takes\.id' is not JSON"):
                await runtime.enqueue("takes.id", note_id=datetime.date(2024, 1, 1))
            with pytest.raises(JobArgumentError, match="not JSON"):
                await runtime.enqueue("takes.id", note_id=float("nan"))
            with pytest.raises(JobArgumentError, match="do not fit"):
                await runtime.enqueue("takes.id", note=1)
            with pytest.raises(JobArgumentError, match="do not fit"):
                await runtime.enqueue("takes.id")
            with pytest.raises(JobArgumentError, match="key"):
                await runtime.enqueue("takes.id", note_id=1, key="")
            with pytest.raises(JobArgumentError, match="delay"):
                await runtime.enqueue("takes.id", note_id=1, delay=-1)
            with pytest.raises(JobArgumentError, match="JSON object"):
                await runtime.publish("note.created", [1, 2])  # type: ignore[arg-type]
            counts = await runtime.counts()
            assert counts["q"].waiting == 0  # nothing half-stored

    asyncio.run(main())


def test_enqueue_before_start_is_an_error(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path / "jobs.db")
    with pytest.raises(CorralRuntimeError, match="not running"):
        asyncio.run(runtime.enqueue("takes.id", note_id=1))


def test_unreadable_store_path(tmp_path: Path) -> None:
    missing_dir = _runtime(tmp_path / "no" / "such" / "dir" / "jobs.db")
    with pytest.raises(StoreUnavailable, match="cannot open sqlite store"):
        asyncio.run(missing_dir.start())

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable, match=r"garbage\.db"):
        asyncio.run(_runtime(garbage).start())
    assert garbage.read_bytes() == b"this is not a database" * 100  # untouched

    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o000)
        try:
            with pytest.raises(StoreUnavailable):
                asyncio.run(_runtime(locked / "jobs.db").start())
        finally:
            locked.chmod(0o700)


def test_start_with_unknown_queue(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown queue"):
        asyncio.run(_runtime(tmp_path / "jobs.db").start(queues=["nope"]))


def _job_a(ctx: object, a: int) -> None: ...
def _job_defaults(ctx: object, a: int, b: int = 1, *, c: int, d: int = 2) -> None: ...
def _job_rest(context: object, a: int, **rest: object) -> None: ...
def _job_positional(ctx: object, a: int, /, b: int = 1) -> None: ...
def _job_varargs(ctx: object, *args: object, a: int = 1) -> None: ...


@pytest.mark.parametrize("fn", [_job_a, _job_defaults, _job_rest, _job_positional, _job_varargs])
def test_the_enqueue_fast_check_of_arguments_agrees_with_signature_bind(fn: Callable[..., None]) -> None:
    # The enqueue path skips Signature.bind when the shape alone says a call fits: it must never say yes
    # where bind says no (and it defers to bind for shapes it does not model).
    from itertools import combinations

    from corral.runtime.declarations import KeywordShape

    signature = inspect.signature(fn)
    shape = KeywordShape.of(signature)
    names = ["a", "b", "c", "d", "e", "ctx", "context", "args", "rest"]
    for size in range(len(names) + 1):
        for chosen in combinations(names, size):
            try:
                signature.bind(None, **dict.fromkeys(chosen))
                binds = True
            except TypeError:
                binds = False
            if shape is not None:
                assert shape.fits(chosen) == binds, (fn.__name__, chosen)
    assert (shape is None) == (fn in (_job_positional, _job_varargs))
