"""`--format markdown`: a job summary (for `$GITHUB_STEP_SUMMARY`), rendered from `templates/summary.md.j2`:
the rules that fired and every finding, the full rule table folded away in a `<details>`. On GitHub Actions
(`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY` and `GITHUB_SHA` set) each location links to its line at the
commit checked."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding
from corral.gates.outputs.shared import code_table

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def _markdown_text(value: object) -> str:
    """Plain text safe inside a Markdown table cell: nothing in it formats, links or ends the cell."""
    text = str(value).replace("&", "&amp;").replace("\r", " ").replace("\n", " ")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _work_tree_top(root: Path) -> Path | None:
    """The top of the git work tree holding `root` (where a repository's file URLs start), if any."""
    for folder in (root, *root.parents):
        if (folder / ".git").exists():  # a folder, or a file in a linked worktree or submodule
            return folder
    return None


def _line_links(result: CheckResult, environ: Mapping[str, str]) -> Mapping[Finding, str]:
    """Each finding's URL at the commit checked, when the environment names the server, repository and
    commit and the findings' files lie in its work tree; none otherwise (a link to a guessed path would
    point at the wrong file)."""
    from urllib.parse import quote

    server, repository, commit = (
        environ.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA")
    )
    top = _work_tree_top(result.root)
    if not (server and repository and commit) or top is None:
        return {}
    base = f"{quote(server.rstrip('/'), safe=':/')}/{quote(repository)}/blob/{quote(commit)}"
    links = {}
    for finding in result.findings:
        in_tree = os.path.relpath(result.root / finding.path, top).replace(os.sep, "/")
        if not in_tree.startswith("../"):
            links[finding] = f"{base}/{quote(in_tree)}#L{finding.line}"
    return links


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
    rules = [{"code": code, "summary": summary, "count": counts[code]} for code, summary in code_table(result).items()]
    links = _line_links(result, os.environ)
    findings = [{**finding.as_dict(), "url": links.get(finding)} for finding in result.findings]
    return environment.get_template("summary.md.j2").render(
        files=result.files,
        files_with_findings=len({f.path for f in result.findings}),
        findings=findings,
        rules=rules,
        not_run=result.not_run,
    )
