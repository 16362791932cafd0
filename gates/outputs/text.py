"""`--format text`: one `path:line:col: CODE message` line per finding, then the summary line."""

from __future__ import annotations

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import summary


def render_text(result: CheckResult) -> str:
    lines = [f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in result.findings]
    return "\n".join([*lines, summary(result)]) + "\n"
