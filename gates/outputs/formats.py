"""How a run's findings are written: one function per `--format`.

`text` and `json` for people and scripts; for CI: `github` (workflow commands that annotate the diff),
`sarif` (code scanning), `markdown` (the job summary, from `templates/summary.md.j2`) and `junit`
(one test case per rule family, for CI systems that show test reports).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _summary(result: CheckResult) -> str:
    checked = f"{_plural(result.files, 'file')} checked"
    if not result.findings:
        return f"All checks passed ({checked})."
    files = len({f.path for f in result.findings})
    return f"Found {_plural(len(result.findings), 'finding')} in {_plural(files, 'file')} ({checked})."


def render_text(result: CheckResult) -> str:
    lines = [f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in result.findings]
    return "\n".join([*lines, _summary(result)]) + "\n"


def render_json(result: CheckResult) -> str:
    document = {
        "version": 1,
        "root": str(result.root),
        "files": result.files,
        "findings": [finding.as_dict() for finding in result.findings],
        **result.reports,
    }
    return json.dumps(document, indent=2) + "\n"


def _rules(result: CheckResult) -> dict[str, str]:
    """Every code with its summary, sorted: the registry's, and any a finding carries beside them."""
    from corral.gates.rules import CODES

    codes = {**{f.code: f.code for f in result.findings}, **CODES}
    return dict(sorted(codes.items()))


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(result: CheckResult) -> str:
    """GitHub Actions workflow commands: one `::error` per finding, which GitHub shows on the diff."""
    lines = [
        f"::error file={_escape_property(f.path)},line={f.line},col={f.col},title={_escape_property(f.code)}"
        f"::{_escape_data(f.message)}"
        for f in result.findings
    ]
    return "\n".join([*lines, _summary(result)]) + "\n"


def _sarif_result(finding: Finding, index: int) -> dict[str, object]:
    from urllib.parse import quote

    location = {
        "artifactLocation": {"uri": quote(finding.path), "uriBaseId": "SRCROOT"},
        "region": {"startLine": finding.line, "startColumn": finding.col},
    }
    return {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": "error",
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": location}],
    }


def render_sarif(result: CheckResult) -> str:
    """SARIF 2.1.0: one rule per code (summary and help from the registry), one result per finding."""
    from importlib.metadata import version

    rules = _rules(result)
    index = {code: position for position, code in enumerate(rules)}
    driver = {
        "name": "corral",
        "version": version("corral"),
        "rules": [
            {
                "id": code,
                "shortDescription": {"text": summary},
                "help": {"text": f"{code}: {summary}. corral's gate has no inline suppression: fix the code."},
                "defaultConfiguration": {"level": "error"},
            }
            for code, summary in rules.items()
        ],
    }
    run = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"SRCROOT": {"uri": result.root.as_uri().rstrip("/") + "/"}},
        "results": [_sarif_result(finding, index[finding.code]) for finding in result.findings],
    }
    document = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2) + "\n"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")


def _markdown_text(value: object) -> str:
    """Plain text safe inside a Markdown table cell: nothing in it formats, links or ends the cell."""
    text = str(value).replace("&", "&amp;").replace("\r", " ").replace("\n", " ")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def render_markdown(result: CheckResult) -> str:
    """A job summary (for `$GITHUB_STEP_SUMMARY`): a table of findings per rule, then every finding."""
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
    rules = [{"code": code, "summary": summary, "count": counts[code]} for code, summary in _rules(result).items()]
    return environment.get_template("summary.md.j2").render(
        files=result.files,
        files_with_findings=len({f.path for f in result.findings}),
        findings=result.findings,
        rules=rules,
    )


# Compiled on first use (by `re`'s own cache): the character ranges cost milliseconds to compile, and most
# runs write other formats.
_XML_ILLEGAL = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def _xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold at all (escaping is ElementTree's job)."""
    return re.sub(_XML_ILLEGAL, "\ufffd", text)


def render_junit(result: CheckResult) -> str:
    """JUnit XML: one test case per rule family (CRL0, CRL1, ...) that fails listing its findings."""
    import xml.etree.ElementTree as ET

    families: dict[str, list[Finding]] = {code[:4]: [] for code in _rules(result)}
    for finding in result.findings:
        families[finding.code[:4]].append(finding)
    failures = sum(1 for found in families.values() if found)
    counts = {"tests": str(len(families)), "failures": str(failures), "errors": "0", "skipped": "0"}
    suites = ET.Element("testsuites", {"name": "corral", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": "corral check", **counts})
    for family, found in families.items():
        case = ET.SubElement(suite, "testcase", {"classname": "corral", "name": family})
        if found:
            failure = ET.SubElement(case, "failure", {"type": family, "message": _plural(len(found), "finding")})
            failure.text = _xml_text("\n".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in found))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


FORMATS: dict[str, Callable[[CheckResult], str]] = {
    "text": render_text,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "markdown": render_markdown,
    "junit": render_junit,
}
