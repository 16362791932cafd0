"""What the gate writes down about `corral.runtime` matches the runtime.

The gate may import only `corral.runtime.budget` (an import-linter contract), so the names it resolves
declarations to (`Queue`, `Runtime`), the keywords it reads (`timeout`, `relay`...) and the defaults it
assumes for a left-out argument are written in the gate. Each is pinned here to the runtime itself.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import corral.runtime
import pytest
from corral.gates.config import Config
from corral.gates.frameworks import corral as corral_framework
from corral.gates.rules import connection_budget
from corral.gates.rules.connection_budget import RUNTIME_DEFAULTS
from corral.runtime import ConfigError, Queue, Runtime


def _resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)


@pytest.mark.parametrize(
    ("names", "cls"),
    [
        (corral_framework.QUEUE_CLASSES, Queue),
        (corral_framework.RUNTIME_CLASSES, Runtime),
        (connection_budget.QUEUES, Queue),
        (connection_budget.RUNTIMES, Runtime),
    ],
    ids=[
        "frameworks.corral.QUEUE_CLASSES",
        "frameworks.corral.RUNTIME_CLASSES",
        "connection_budget.QUEUES",
        "connection_budget.RUNTIMES",
    ],
)
def test_qualified_names_are_where_the_class_is_defined_and_exported(names: frozenset[str], cls: type) -> None:
    assert {f"{cls.__module__}.{cls.__qualname__}", f"corral.runtime.{cls.__name__}"} == set(names)
    for dotted in names:
        assert _resolve(dotted) is cls, dotted
    assert cls.__name__ in corral.runtime.__all__


def test_the_job_methods_take_the_kind_name_first_and_the_timeout_by_keyword() -> None:
    timeout = corral_framework.TIMEOUT
    for method in corral_framework.JOB_METHODS:
        parameters = _parameters(getattr(Queue, method))
        names = list(parameters)
        # The gate reads the kind's name from the call's first positional argument.
        assert names[1] == "name" and parameters["name"].kind is inspect.Parameter.POSITIONAL_ONLY, method
        assert parameters[timeout].kind is inspect.Parameter.KEYWORD_ONLY, method
        # A left-out timeout means the queue's: no default of the method's own.
        assert parameters[timeout].default is None, method


def test_the_queue_takes_its_name_first_and_its_timeout_and_workers_by_keyword() -> None:
    parameters = _parameters(Queue.__init__)
    assert list(parameters)[1] == "name" and parameters["name"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert parameters[corral_framework.TIMEOUT].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters[corral_framework.TIMEOUT].default is None  # a queue has no timeout unless given one
    assert parameters["max_workers"].kind is inspect.Parameter.KEYWORD_ONLY  # read by CRL301
    assert parameters["max_workers"].default is inspect.Parameter.empty


def test_a_kind_inherits_its_queue_timeout_and_none_or_zero_is_refused() -> None:
    queue = Queue("pins", max_workers=1, timeout=5)
    queue.job("pins.inherits")(lambda ctx: None)
    queue.job("pins.own", timeout=2)(lambda ctx: None)
    queue.periodic("pins.periodic", every=60)(lambda ctx: None)
    assert {name: kind.timeout for name, kind in queue.kinds.items()} == {
        "pins.inherits": 5.0,
        "pins.own": 2.0,
        "pins.periodic": 5.0,
    }
    untimed = Queue("pins-untimed", max_workers=1)
    with pytest.raises(ConfigError):
        untimed.job("pins.none")(lambda ctx: None)  # CRL201: no timeout from the job or its queue
    with pytest.raises(ConfigError):
        queue.job("pins.zero", timeout=0)(lambda ctx: None)  # what `corral prove` plants: zero is no limit


def test_runtime_keywords_and_defaults() -> None:
    parameters = _parameters(Runtime.__init__)
    for name in ("queues", "relay", "max_conns", "reserve"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert {name: parameters[name].default for name in RUNTIME_DEFAULTS} == RUNTIME_DEFAULTS
    # A runtime that leaves `reserve` out gets the deployment's, whose default is the runtime's.
    assert Config._field_defaults["reserve"] == parameters["reserve"].default


def test_the_keywords_the_gate_does_not_read_are_no_budget_input() -> None:
    # The gate reads `queues`, `relay`, `max_conns` and `reserve` and skips every other keyword (`store`,
    # `include`, the intervals...): none of those may change the boot check's arithmetic.
    queue = Queue("pins-budget", max_workers=3, timeout=5)
    plain = Runtime(queues=[queue], store="memory://", max_conns=10, relay=1)
    other = Runtime(
        queues=[queue],
        store="memory://",
        max_conns=10,
        relay=1,
        include=["app.jobs", "app.email_jobs"],
        unknown_kind_snooze=5.0,
        key_busy_snooze=1.0,
    )
    assert other.budget().describe() == plain.budget().describe()
    assert _parameters(Runtime.__init__)["include"].kind is inspect.Parameter.KEYWORD_ONLY


def test_enqueue_and_publish_write_in_the_callers_transaction_only_when_given_conn() -> None:
    # CRL402 reports `runtime.enqueue(...)` / `publish(...)` inside a transaction unless `conn=` is given.
    for method in corral_framework.ENQUEUE_METHODS:
        parameter = _parameters(getattr(Runtime, method))[corral_framework.IN_TRANSACTION]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, method
        assert parameter.default is None, method  # left out: the runtime's own connection
