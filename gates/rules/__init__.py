"""Every per-file rule, and the registry mapping each code to its summary."""

from __future__ import annotations

from corral.gates.registry import ENGINE_CODES, Rule
from corral.gates.rules.hidden_spawners import HiddenSpawners
from corral.gates.rules.unmanaged_concurrency import UnmanagedConcurrency

RULES: tuple[type[Rule], ...] = (UnmanagedConcurrency, HiddenSpawners)

CODES: dict[str, str] = dict(ENGINE_CODES)
for _rule in RULES:
    CODES.update(_rule.codes)

__all__ = ["CODES", "RULES"]
