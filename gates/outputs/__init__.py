"""How a run's findings are written: one module per `--format`, registered in `FORMATS`.

`text` and `json` for people and scripts; for CI: `github` (workflow commands that annotate the diff),
`sarif` (code scanning), `markdown` (the job summary, from `templates/summary.md.j2`), `junit` (a test case
per finding, for CI systems that show test reports) and `gitlab` (GitLab's Code Quality report). What several
share (the summary line, the code table a run's findings are shown against) is in `shared`; what links a code
to its documentation in `rule_docs`, and the fingerprint that follows a finding across line moves in
`fingerprints`.
"""

from __future__ import annotations

from collections.abc import Callable

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.github import render_github
from corral.gates.outputs.gitlab import render_gitlab
from corral.gates.outputs.json import render_json
from corral.gates.outputs.junit import render_junit
from corral.gates.outputs.markdown import render_markdown
from corral.gates.outputs.sarif import render_sarif
from corral.gates.outputs.text import render_text

FORMATS: dict[str, Callable[[CheckResult], str]] = {
    "text": render_text,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "markdown": render_markdown,
    "junit": render_junit,
    "gitlab": render_gitlab,
}

__all__ = ["FORMATS"]
