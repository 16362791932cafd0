"""`--format text`: one `path:line:col: CODE message` line per finding (the path relative to the working
directory), then the summary line."""

from __future__ import annotations

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import located, summary


def render_text(result: CheckResult) -> str:
    lines = [
        f"{place.shown}:{line}:{col}: {code} {message}"
        for place in located(result)
        for _, line, col, code, message in [place.finding]
    ]
    return "\n".join([*lines, summary(result)]) + "\n"
