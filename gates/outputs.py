"""How a run's findings are written: one function per `--format`."""

from __future__ import annotations

import json
from collections.abc import Callable

from corral.gates.engine import CheckResult


def render_text(result: CheckResult) -> str:
    lines = [f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in result.findings]
    files = len({f.path for f in result.findings})
    checked = f"{result.files} file{'s' if result.files != 1 else ''} checked"
    if result.findings:
        count = len(result.findings)
        lines.append(
            f"Found {count} finding{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''} ({checked})."
        )
    else:
        lines.append(f"All checks passed ({checked}).")
    return "\n".join(lines) + "\n"


def render_json(result: CheckResult) -> str:
    document = {
        "version": 1,
        "root": str(result.root),
        "files": result.files,
        "findings": [finding.as_dict() for finding in result.findings],
        **result.reports,
    }
    return json.dumps(document, indent=2) + "\n"


FORMATS: dict[str, Callable[[CheckResult], str]] = {"text": render_text, "json": render_json}
