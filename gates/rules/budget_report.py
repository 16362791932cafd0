"""CRL301-CRL302, the whole-project half: the connection budget of every corral `Runtime(...)`.

Reads the `budget` facts the per-file rule (`rules/connection_budget.py`) records, applies the
deployment settings `max_conns`, `processes` and `reserve` from `[tool.corral]`, and checks each runtime
with the arithmetic of the runtime's own boot check (`corral.runtime.budget.compute_budget`: one
function, two callers). Being a whole-project check, the gate reports it and the per-file flake8 front
does not. A value the gate could not resolve is CRL302 where it stands: a budget that cannot be proven
does not pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.gates.findings import FactsByFile, Finding

if TYPE_CHECKING:
    from corral.gates.config import Config

OVER_BUDGET = "CRL301"
UNPROVEN = "CRL302"
FACT = "budget"
# What `Runtime.__init__` assumes when an argument is left out.
RUNTIME_DEFAULTS: dict[str, float] = {"relay": 1, "max_conns": 40}


def budget_check(facts: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
    """CRL301/CRL302 for every runtime declared in the project, and the `budget` report section."""
    findings: list[Finding] = []
    entries: list[dict[str, Any]] = []
    reports[FACT] = entries
    declared = [(relpath, fact) for relpath, recorded in facts.items() for fact in recorded.get(FACT, ())]
    if not declared:
        return findings
    # Imported only for a project that declares a runtime: the package brings asyncio with it.
    from corral.runtime.budget import compute_budget

    for relpath, fact in sorted(declared, key=lambda item: (item[0], item[1]["line"])):
        where = f"{relpath}:{fact['line']}"
        # A deployment's [tool.corral] max_conns stands in for a pool size the code reads at run time.
        problems = [
            problem[:3]
            for problem in fact["unresolved"]
            if not (config.max_conns and len(problem) > 3 and problem[3] == "max_conns")
        ]
        queues = [(str(name), workers) for name, workers in fact["queues"]]
        relay = RUNTIME_DEFAULTS["relay"] if fact["relay"] is None else fact["relay"]
        max_conns = config.max_conns or (
            RUNTIME_DEFAULTS["max_conns"] if fact["max_conns"] is None else fact["max_conns"]
        )
        reserve = config.reserve if fact["reserve"] is None else fact["reserve"]
        for label, value in (*queues, ("relay", relay), ("max_conns", max_conns)):
            minimum = 0 if label == "relay" else 1
            if value != int(value) or value < minimum:
                problems.append([relpath, fact["line"], f"{label} must be a whole number >= {minimum}, got {value:g}"])
        if not 0 < reserve <= 1:
            problems.append([relpath, fact["line"], f"reserve must be in (0, 1], got {reserve:g}"])
        for path, line, reason in problems:
            message = f"{reason}; the connection budget of the runtime at {where} cannot be proven"
            findings.append(Finding(path, line, 1, UNPROVEN, f"{message}: use literals or module-level constants"))
        entry: dict[str, Any] = {"path": relpath, "line": fact["line"], "ok": None, "problems": len(problems)}
        if not problems:
            budget = compute_budget(
                [(name, int(workers)) for name, workers in queues],
                relay=int(relay),
                max_conns=int(max_conns),
                reserve=reserve,
                processes=config.processes,
            )
            entry.update(
                queues=[{"name": name, "workers": workers} for name, workers in budget.queues],
                relay=budget.relay,
                processes=budget.processes,
                max_conns=budget.max_conns,
                reserve=budget.reserve,
                total=budget.total,
                limit=budget.limit,
                ok=budget.ok,
                arithmetic=budget.describe(),
            )
            if not budget.ok:
                message = (
                    f"workers could drain the database pool: {budget.describe()}; lower max_workers or raise max_conns"
                )
                findings.append(Finding(relpath, fact["line"], fact["col"], OVER_BUDGET, message))
        entries.append(entry)
    return findings


def render_budget(entries: list[dict[str, Any]]) -> str:
    """The text table `corral check --budget` prints (and prints by itself when a budget fails)."""
    if not entries:
        return "No corral Runtime(...) declared: no connection budget to check.\n"
    lines = []
    for entry in entries:
        where = f"{entry['path']}:{entry['line']}"
        if entry["ok"] is None:
            lines.append(f"budget of {where}: cannot be proven ({entry['problems']} unresolved value(s), see CRL302)")
            continue
        lines.append(f"budget of {where}: {'ok' if entry['ok'] else 'OVER'}")
        for queue in entry["queues"]:
            lines.append(f"  {queue['name']:<24} {queue['workers']:>5}")
        lines.append(f"  {'relay':<24} {entry['relay']:>5}")
        lines.append(f"  {entry['arithmetic']}")
    return "\n".join(lines) + "\n"
