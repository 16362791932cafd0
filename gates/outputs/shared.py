"""What several formats share: the summary line, and the code table a run's findings are shown against."""

from __future__ import annotations

from corral.gates.engine.run import CheckResult


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def summary(result: CheckResult) -> str:
    checked = f"{plural(result.files, 'file')} checked"
    if result.not_run:
        checked += f"; not run: {', '.join(result.not_run)}"
    if not result.findings:
        return f"All checks passed ({checked})."
    files = len({f.path for f in result.findings})
    return f"Found {plural(len(result.findings), 'finding')} in {plural(files, 'file')} ({checked})."


def code_table(result: CheckResult) -> dict[str, str]:
    """Every code with its summary, sorted: the registry's, and any a finding carries beside them."""
    # The registry loads every rule: only the formats that show the table (SARIF, JUnit, markdown) pay.
    from corral.gates.rules import CODES

    codes = {**{f.code: f.code for f in result.findings}, **CODES}
    return dict(sorted(codes.items()))
