"""`--format sarif`: SARIF 2.1.0 for code scanning, one rule per code and one result per finding."""

from __future__ import annotations

import json

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding
from corral.gates.outputs.shared import code_table


def _sarif_result(finding: Finding, index: int) -> dict[str, object]:
    from urllib.parse import quote

    region = {"startLine": finding.line, "startColumn": finding.col}
    if finding.end_line:
        region.update(endLine=finding.end_line, endColumn=finding.end_col)
    location = {
        "artifactLocation": {"uri": quote(finding.path), "uriBaseId": "SRCROOT"},
        "region": region,
    }
    return {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": "error",
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": location}],
    }


def render_sarif(result: CheckResult) -> str:
    """The rules carry each code's summary and help from the code table."""
    from importlib.metadata import version

    rules = code_table(result)
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
        # Columns count characters, as in every other format (SARIF's default is UTF-16 code units).
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {"SRCROOT": {"uri": result.root.as_uri().rstrip("/") + "/"}},
        "results": [_sarif_result(finding, index[finding.code]) for finding in result.findings],
    }
    document = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2) + "\n"
