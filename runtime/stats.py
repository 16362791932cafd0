"""RuntimeStats: the counters every service of one runtime adds to, for tests, logs and the benchmark."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RuntimeStats"]


@dataclass
class RuntimeStats:
    """Counters of this process's runtime, for tests, logs and the benchmark."""

    completed: int = 0
    failed_attempts: int = 0
    snoozed: int = 0
    unknown_kind_snoozed: int = 0  # claimed jobs of a kind this process does not know, put back to waiting
    released: int = 0
    rescued: int = 0
    killed_children: int = 0  # process-isolated attempts SIGKILLed at their timeout
    crashed_children: int = 0  # process-isolated attempts whose child died without replying
    cancelled_attempts: int = 0  # attempts stopped because their job was cancelled
    relay_passes: list[int] = field(default_factory=list)  # events moved per non-empty pass
