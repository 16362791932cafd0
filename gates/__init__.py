"""corral's static gate: the rule engine, its configuration, outputs and the `corral` command."""

from corral.gates.engine.run import CheckResult, check_paths
from corral.gates.findings import Finding

__all__ = ["CheckResult", "Finding", "check_paths"]
