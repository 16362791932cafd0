"""`--format github`: GitHub Actions workflow commands, which GitHub shows on the diff; each names its file
relative to the git top level, where GitHub looks for it whatever folder the gate ran in."""

from __future__ import annotations

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import located, repository_top, stale_baseline, summary


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(result: CheckResult) -> str:
    """One `::error` per finding, then the summary line."""
    lines = [
        f"::error file={_escape_property(place.for_ci)},line={f.line},col={f.col},title={_escape_property(f.code)}"
        f"::{_escape_data(f.message)}"
        for place in located(result, repository_top(result))
        for f in (place.finding,)
    ]
    stale = stale_baseline(result)
    if stale:  # fails the run: it must not read as a clean one on the pull request
        lines.append(f"::error title=corral baseline::{_escape_data(stale)}")
    return "\n".join([*lines, summary(result)]) + "\n"
