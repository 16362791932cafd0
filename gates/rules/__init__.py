"""Every per-file rule, and the registry mapping each code to its summary."""

from __future__ import annotations

from corral.gates.rules.base import ENGINE_CODES, Rule
from corral.gates.rules.connection_budget import ConnectionBudget
from corral.gates.rules.hidden_spawners import HiddenSpawners
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

CODES: dict[str, str] = dict(ENGINE_CODES)
for _rule in RULES:
    CODES.update(_rule.codes)

__all__ = ["CODES", "RULES"]
