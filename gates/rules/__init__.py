"""The registries: every per-file rule (`RULES`), every whole-project check (`PROJECT_CHECKS`, the project
halves of the rules that have one), the fact records those read (`FACT_KINDS`), and the one code table
(`CODES`: each code with its summary, from the engine's declaration and the rules' own) with the rule
families derived from it (`FAMILIES`)."""

from __future__ import annotations

from corral.gates.findings import code_family
from corral.gates.rules.base import EngineCodes, Fact, ProjectCheck, Rule, code_table
from corral.gates.rules.connection_budget import (
    CeleryBudgetCheck,
    ConnectionBudget,
    ConnectionBudgetCheck,
    EngineBudgetCheck,
)
from corral.gates.rules.hidden_spawners import HiddenSpawners
from corral.gates.rules.job_report import JobsReport
from corral.gates.rules.job_timeouts import JobTimeouts
from corral.gates.rules.network_in_transaction import NetworkInTransaction
from corral.gates.rules.network_timeouts import NetworkTimeouts
from corral.gates.rules.unmanaged_concurrency import UnmanagedConcurrency

RULES: tuple[type[Rule], ...] = (
    UnmanagedConcurrency,
    HiddenSpawners,
    NetworkInTransaction,
    JobTimeouts,
    NetworkTimeouts,
    ConnectionBudget,
)

# In this order: each adds its section to the reports, and `--format json` shows them in that order.
PROJECT_CHECKS: tuple[type[ProjectCheck], ...] = (
    JobsReport,
    ConnectionBudgetCheck,
    CeleryBudgetCheck,
    EngineBudgetCheck,
)

FACT_KINDS: dict[str, type[Fact]] = {check.fact.fact_kind(): check.fact for check in PROJECT_CHECKS}

CODES: dict[str, str] = code_table((EngineCodes, *RULES))

# Every rule family (CRL0 for the engine's own codes), with its codes.
FAMILIES: dict[str, tuple[str, ...]] = {
    name: tuple(code for code in CODES if code_family(code) == name)
    for name in sorted({code_family(code) for code in CODES})
}

__all__ = ["CODES", "FACT_KINDS", "FAMILIES", "PROJECT_CHECKS", "RULES"]
