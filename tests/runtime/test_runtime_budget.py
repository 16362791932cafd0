"""The connection budget: one pure function, its rendering, and the boot check that uses it."""

from __future__ import annotations

import ast
import asyncio
import sys
from pathlib import Path

import pytest
from corral.runtime import BudgetError, Queue, Runtime
from corral.runtime.budget import Budget, compute_budget

SEED = [("index", 4), ("notify", 2), ("webhook", 8), ("maintenance", 1), ("fetch", 3)]


def test_seed_figures_fit_half_of_forty() -> None:
    budget = compute_budget(SEED, relay=1, max_conns=40)
    assert (budget.total, budget.limit, budget.ok) == (19, 20, True)
    assert budget.describe() == (
        "index 4 + notify 2 + webhook 8 + maintenance 1 + fetch 3 + relay 1 = 19 <= 20 (max_conns 40 x reserve 0.5)"
    )


def test_over_budget_renders_the_arithmetic() -> None:
    queues = [("index", 4), ("notify", 2), ("webhook", 10), ("maintenance", 1), ("fetch", 3)]
    budget = compute_budget(queues, relay=1, max_conns=40, reserve=0.5)
    assert not budget.ok
    assert budget.describe() == (
        "index 4 + notify 2 + webhook 10 + maintenance 1 + fetch 3 + relay 1 = 21 > 20 (max_conns 40 x reserve 0.5)"
    )


def test_processes_multiply_the_total() -> None:
    budget = compute_budget([("index", 4), ("webhook", 8)], relay=1, max_conns=40, processes=2)
    assert budget.total == 26 and budget.limit == 20 and not budget.ok
    assert budget.describe() == "(index 4 + webhook 8 + relay 1) x processes 2 = 26 > 20 (max_conns 40 x reserve 0.5)"


def test_budget_is_frozen_and_carries_inputs() -> None:
    budget = compute_budget([("a", 1)], relay=0, max_conns=3, reserve=0.75)
    assert budget == Budget(
        queues=(("a", 1),), relay=0, total=1, limit=2, ok=True, max_conns=3, reserve=0.75, processes=1
    )
    with pytest.raises(AttributeError):
        budget.total = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_conns": 0},
        {"reserve": 0.0},
        {"reserve": 1.5},
        {"relay": -1},
        {"processes": 0},
    ],
)
def test_budget_rejects_nonsense(kwargs: dict[str, float]) -> None:
    args = {"queues": [("a", 1)], "relay": 1, "max_conns": 40, **kwargs}
    with pytest.raises(ValueError):
        compute_budget(**args)  # type: ignore[arg-type]


def test_budget_module_imports_only_stdlib() -> None:
    import corral.runtime.budget as module

    tree = ast.parse(Path(module.__file__ or "").read_text())
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
    assert "asyncio" not in imported


def test_start_refuses_over_budget(tmp_path: Path) -> None:
    queues = [
        Queue(name, max_workers=workers, timeout=30)
        for name, workers in [("index", 4), ("notify", 2), ("webhook", 10), ("maintenance", 1), ("fetch", 3)]
    ]
    runtime = Runtime(queues=queues, store=f"sqlite:///{tmp_path / 'jobs.db'}", max_conns=40, relay=1)
    with pytest.raises(BudgetError) as caught:
        asyncio.run(runtime.start())
    assert "index 4 + notify 2 + webhook 10 + maintenance 1 + fetch 3 + relay 1 = 21 > 20" in str(caught.value)
    # nothing was opened: the store file does not exist
    assert not (tmp_path / "jobs.db").exists()


def test_start_budget_counts_only_the_queues_this_process_runs(tmp_path: Path) -> None:
    big = Queue("big", max_workers=30, timeout=5)
    small = Queue("small", max_workers=2, timeout=5)
    runtime = Runtime(queues=[big, small], store=f"sqlite:///{tmp_path / 'jobs.db'}", max_conns=40, relay=1)

    async def main() -> None:
        await runtime.start(queues=["small"])
        await runtime.stop()

    asyncio.run(main())
