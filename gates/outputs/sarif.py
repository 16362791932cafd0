"""`--format sarif`: SARIF 2.1.0 for code scanning, one rule per code and one result per finding.

A location's URI is relative to the git top level (`uriBaseId` `%SRCROOT%`, which `originalUriBaseIds`
gives as a `file://` URI), where code scanning looks for the file whatever folder the gate ran in; a file
outside a git work tree is an absolute `file://` URI."""

from __future__ import annotations

import json
from pathlib import Path

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import Located, code_table, located, repository_top

SOURCE_ROOT = "%SRCROOT%"


def _artifact_location(place: Located) -> dict[str, str]:
    from urllib.parse import quote

    if place.in_repository is None:
        return {"uri": Path(place.absolute).as_uri()}
    return {"uri": quote(place.in_repository), "uriBaseId": SOURCE_ROOT}


def _sarif_result(place: Located, index: int) -> dict[str, object]:
    finding = place.finding
    location = {
        "artifactLocation": _artifact_location(place),
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
    top = repository_top(result)
    run: dict[str, object] = {"tool": {"driver": driver}}
    if top is not None:
        run["originalUriBaseIds"] = {SOURCE_ROOT: {"uri": top.as_uri().rstrip("/") + "/"}}
    run["results"] = [_sarif_result(place, index[place.finding.code]) for place in located(result, top)]
    document = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2) + "\n"
