"""`--format markdown`: a job summary (for `$GITHUB_STEP_SUMMARY`), rendered from `templates/summary.md.j2`:
the rules that fired and every finding, the full rule table folded away in a `<details>`. On GitHub Actions
(`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY` and `GITHUB_SHA` set) each location links to its line at the
commit checked."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import Located, code_table, located, repository_top, stale_baseline

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def _markdown_text(value: object) -> str:
    """Plain text safe inside a Markdown table cell: nothing in it formats, links or ends the cell."""
    text = str(value).replace("&", "&amp;").replace("\r", " ").replace("\n", " ")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _line_link(place: Located, environ: Mapping[str, str]) -> str | None:
    """The finding's URL at the commit checked, when the environment names the server, repository and commit
    and its file lies in the work tree; None otherwise (a link to a guessed path would point at the wrong
    file)."""
    from urllib.parse import quote

    server, repository, commit = (
        environ.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA")
    )
    if not (server and repository and commit) or place.in_repository is None:
        return None
    base = f"{quote(server.rstrip('/'), safe=':/')}/{quote(repository)}/blob/{quote(commit)}"
    return f"{base}/{quote(place.in_repository)}#L{place.finding.line}"


def render_markdown(result: CheckResult) -> str:
    """The headline, the rules that fired with their counts, every finding (each linked to its line on
    GitHub Actions), then every rule of the table in a folded `<details>`."""
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
    places = located(result, repository_top(result))
    findings = [
        {**place.finding.as_dict(), "path": place.for_ci, "url": _line_link(place, os.environ)} for place in places
    ]
    rules = [{"code": code, "summary": summary, "count": counts[code]} for code, summary in code_table(result).items()]
    return environment.get_template("summary.md.j2").render(
        files=result.files,
        files_with_findings=len({place.absolute for place in places}),
        findings=findings,
        rules=rules,
        not_run=result.not_run,
        stale_baseline=stale_baseline(result),
    )
