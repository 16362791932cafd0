"""`--format text`: one `path:line:col: CODE message` line per finding (the path relative to the working
directory), then the summary line; on request the count per code (`--statistics`), colour (a terminal) or
no summary (`--quiet`)."""

from __future__ import annotations

from collections import Counter

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import code_table, located, summary

# ANSI SGR sequences: the path bold, the code bold red, as ruff and flake8's colour themes show them.
_BOLD, _RED_BOLD, _RESET = "\x1b[1m", "\x1b[1;31m", "\x1b[0m"


def render_text(result: CheckResult, *, color: bool = False, statistics: bool = False, quiet: bool = False) -> str:
    def styled(text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if color else text

    lines = [
        f"{styled(place.shown, _BOLD)}:{f.line}:{f.col}: {styled(f.code, _RED_BOLD)} {f.message}"
        for place in located(result)
        for f in (place.finding,)
    ]
    if statistics and result.findings:
        counts = Counter(f.code for f in result.findings)
        summaries = code_table(result)
        lines.extend(
            f"{count:<5} {styled(code, _RED_BOLD)} {summaries[code]}" for code, count in sorted(counts.items())
        )
    if not quiet:
        lines.append(summary(result))
    return "".join(f"{line}\n" for line in lines)
