"""`--format markdown`: a job summary (for `$GITHUB_STEP_SUMMARY`), rendered from `templates/summary.md.j2`."""

from __future__ import annotations

import re
from collections import Counter

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import code_table, located, repository_top

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def _markdown_text(value: object) -> str:
    """Plain text safe inside a Markdown table cell: nothing in it formats, links or ends the cell."""
    text = str(value).replace("&", "&amp;").replace("\r", " ").replace("\n", " ")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def render_markdown(result: CheckResult) -> str:
    """A table of findings per code (every code of the table, found or not), then every finding."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("corral.gates.outputs", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML: the `md` filter escapes what Markdown would interpret
    )
    environment.filters["md"] = _markdown_text
    counts = Counter(f.code for f in result.findings)
    # Each finding where the repository has its file, as code scanning and annotations name it.
    findings = [place.finding._replace(path=place.for_ci) for place in located(result, repository_top(result))]
    rules = [{"code": code, "summary": summary, "count": counts[code]} for code, summary in code_table(result).items()]
    return environment.get_template("summary.md.j2").render(
        files=result.files,
        files_with_findings=len({f.path for f in findings}),
        findings=findings,
        rules=rules,
    )
