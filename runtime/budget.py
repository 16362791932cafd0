"""The connection budget: one pure function shared by the runtime's boot check and the static gate.

Owns the arithmetic only. No asyncio, no imports beyond the standard library, so the gate can
import it without pulling in the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Budget", "compute_budget"]


@dataclass(frozen=True)
class Budget:
    """The result of :func:`compute_budget`: the figures and whether they fit."""

    queues: tuple[tuple[str, int], ...]
    relay: int
    total: int
    limit: int
    ok: bool
    max_conns: int
    reserve: float
    processes: int

    def describe(self) -> str:
        """Render the arithmetic, e.g. ``index 4 + relay 1 = 5 <= 20 (max_conns 40 x reserve 0.5)``."""
        terms = [f"{name} {workers}" for name, workers in self.queues]
        terms.append(f"relay {self.relay}")
        summed = " + ".join(terms)
        if self.processes > 1:
            summed = f"({summed}) x processes {self.processes}"
        relation = "<=" if self.ok else ">"
        return (
            f"{summed} = {self.total} {relation} {self.limit} (max_conns {self.max_conns} x reserve {self.reserve:g})"
        )


def compute_budget(
    queues: Sequence[tuple[str, int]],
    relay: int,
    max_conns: int,
    reserve: float = 0.5,
    processes: int = 1,
) -> Budget:
    """Check that the workers of every queue plus the relay fit in ``reserve`` of ``max_conns``.

    ``total = processes * (sum of max_workers + relay)``; ``limit = floor(max_conns * reserve)``.
    The rest of the pool stays free for requests, so a misconfiguration surfaces at boot instead
    of as production queueing.
    """
    if max_conns < 1:
        raise ValueError(f"max_conns must be >= 1, got {max_conns}")
    if not 0.0 < reserve <= 1.0:
        raise ValueError(f"reserve must be in (0, 1], got {reserve}")
    if relay < 0:
        raise ValueError(f"relay must be >= 0, got {relay}")
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    frozen_queues = tuple((str(name), int(workers)) for name, workers in queues)
    for name, workers in frozen_queues:
        if workers < 1:
            raise ValueError(f"queue {name!r}: max_workers must be >= 1, got {workers}")
    total = processes * (sum(workers for _, workers in frozen_queues) + relay)
    # floor, computed without float surprises for the common 0.5
    limit = int(max_conns * reserve + 1e-9)
    return Budget(
        queues=frozen_queues,
        relay=relay,
        total=total,
        limit=limit,
        ok=total <= limit,
        max_conns=max_conns,
        reserve=reserve,
        processes=processes,
    )
