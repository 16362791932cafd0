"""The jobs report, the whole-project half of the CRL2 rule in `corral.gates.rules.job_timeouts`: every
job kind of the project with its effective hard timeout and its source.

Built from the `JobKindFact`s the rule records per file (cached with each file's result), it is the `jobs`
section of `corral check --format json` and the output of `corral jobs --static`, so a team can review
every kind's limit in one place, passing ones included. It lives beside the rule's module rather than in
it so that the rule's body and its report can change apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from corral.gates.rules.base import ProjectCheck, fact_to_json, recorded
from corral.gates.rules.job_timeouts import JobKindFact, JobTimeouts

if TYPE_CHECKING:
    from corral.gates.config import Config
    from corral.gates.findings import FactsByFile, Finding


class JobsReport(ProjectCheck):
    """The `jobs` section: one entry per job kind, sorted by file and line. It reports no findings (the
    per-file rule already did, once per kind)."""

    rule = JobTimeouts
    fact = JobKindFact
    REPORT: ClassVar[str] = "jobs"

    def run(self, facts_by_file: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
        kinds = [{"path": relpath, **fact_to_json(fact)} for relpath, fact in recorded(JobKindFact, facts_by_file)]
        kinds.sort(key=lambda kind: (kind["path"], kind["line"], kind["kind"]))
        reports[self.REPORT] = kinds
        return []


def render_jobs(kinds: list[dict[str, Any]]) -> str:
    """The text table of `corral jobs --static`."""
    rows = [("WHERE", "FRAMEWORK", "KIND", "QUEUE", "TIMEOUT", "SOURCE")]
    for kind in kinds:
        timeout = kind.get("timeout")
        shown = "none" if timeout is None else f"{_seconds(timeout)} s"
        status = f" ({kind['code']})" if kind.get("code") else ""
        rows.append(
            (
                f"{kind['path']}:{kind.get('line', '?')}",
                str(kind.get("framework")),
                str(kind.get("kind")),
                kind.get("queue") or "-",
                shown + status,
                kind.get("source") or "-",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows
    ]
    failing = sum(1 for kind in kinds if kind.get("code"))
    count = len(kinds)
    lines.append(f"{count} job kind{'s' if count != 1 else ''}, {failing} without a provable hard timeout.")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value) == int(value) else str(value)
