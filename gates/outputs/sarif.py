"""`--format sarif`: SARIF 2.1.0 for GitHub code scanning, one rule per code and one result per finding.

Each rule carries its code's documentation (`corral rule`'s, in text and Markdown), its page (`helpUri`) and
its family as tags; each result its region (to the end of the offending code, columns in characters) and the
baseline's fingerprint as `partialFingerprints`, so code scanning follows an alert when code moves. A run
stopped by an error is still a valid log: its invocation failed, with the error as a notification; so is a
run in which one project's configuration could not be used (its CRL000 is also a result, on that file).

A location's URI is relative to the git top level (`uriBaseId` `%SRCROOT%`, which `originalUriBaseIds`
gives as a `file://` URI), where code scanning looks for the file whatever folder the gate ran in; a file
outside a git work tree is an absolute `file://` URI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corral.gates.engine.projects import config_errors
from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding, code_family
from corral.gates.outputs.rule_docs import (
    DOCS_BASE_URL,
    FAMILY_TOPICS,
    RuleDoc,
    code_documentation,
    docs_url,
    documented_codes,
)
from corral.gates.outputs.shared import Located, code_table, located_fingerprinted, repository_top, stale_baseline

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# The key of the fingerprint in `partialFingerprints`; its version changes when the fingerprint does.
FINGERPRINT_KEY = "corralLineHash/v1"
SOURCE_ROOT = "%SRCROOT%"


def _driver(rules: list[dict[str, Any]]) -> dict[str, Any]:
    from importlib.metadata import version

    return {"name": "corral", "version": version("corral"), "informationUri": DOCS_BASE_URL, "rules": rules}


def _log(run: dict[str, Any]) -> str:
    # Columns count characters, as in every other format (SARIF's default is UTF-16 code units).
    document = {"$schema": SCHEMA, "version": "2.1.0", "runs": [{**run, "columnKind": "unicodeCodePoints"}]}
    return json.dumps(document, indent=2) + "\n"


def _rule(code: str, summary: str, doc: RuleDoc | None) -> dict[str, Any]:
    family = code_family(code)
    rule: dict[str, Any] = {
        "id": code,
        "shortDescription": {"text": summary},
        "helpUri": docs_url(code),
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["corral", family, FAMILY_TOPICS.get(family, family)]},
    }
    if doc is None:  # a code a finding carries that no rule documents: its summary is all there is
        rule.update(fullDescription={"text": summary}, help={"text": summary})
        return rule
    description = doc.description()
    rule["fullDescription"] = {"text": f"{summary}. {description}" if description else summary}
    rule["help"] = {
        "text": code_documentation(code, doc, markdown=False),
        "markdown": code_documentation(code, doc, markdown=True),
    }
    return rule


def _region(finding: Finding) -> dict[str, int]:
    region = {"startLine": finding.line, "startColumn": finding.col}
    if finding.end_line:
        region.update(endLine=finding.end_line, endColumn=finding.end_col)
    return region


def _artifact_location(place: Located) -> dict[str, str]:
    from urllib.parse import quote

    if place.in_repository is None:
        return {"uri": Path(place.absolute).as_uri()}
    return {"uri": quote(place.in_repository), "uriBaseId": SOURCE_ROOT}


def _notification(message: str) -> dict[str, Any]:
    return {"level": "error", "message": {"text": message}, "descriptor": {"id": "CRL000"}}


def render_sarif(result: CheckResult) -> str:
    """Every code of the code table as a rule; every finding as an error result of its rule."""
    rules = code_table(result)
    documented = documented_codes()
    index = {code: position for position, code in enumerate(rules)}
    top = repository_top(result)
    results = [
        {
            "ruleId": marked.finding.code,
            "ruleIndex": index[marked.finding.code],
            "level": "error",
            "message": {"text": marked.finding.message},
            "locations": [
                {"physicalLocation": {"artifactLocation": _artifact_location(place), "region": _region(place.finding)}}
            ],
            "partialFingerprints": {FINGERPRINT_KEY: f"{marked.fingerprint}:{marked.occurrence}"},
        }
        for place, marked in located_fingerprinted(result, top)
    ]
    # A project whose configuration could not be used was not checked: the run did not fully succeed.
    unusable = [finding.message for finding in config_errors(result)]
    invocation: dict[str, Any] = {"executionSuccessful": not unusable}
    if unusable:
        invocation["toolExecutionNotifications"] = [_notification(message) for message in unusable]
    stale = stale_baseline(result)
    if stale:
        # The run fails (exit 1) with no result to show: say why where code scanning reads the run.
        invocation["exitCode"] = 1
        invocation.setdefault("toolExecutionNotifications", []).append(
            {"level": "error", "message": {"text": stale}, "descriptor": {"id": "baseline"}}
        )
    run: dict[str, Any] = {
        "tool": {"driver": _driver([_rule(code, summary, documented.get(code)) for code, summary in rules.items()])},
        "invocations": [invocation],
    }
    if top is not None:
        run["originalUriBaseIds"] = {SOURCE_ROOT: {"uri": top.as_uri().rstrip("/") + "/"}}
    return _log({**run, "results": results})


def render_sarif_failure(message: str) -> str:
    """The log of a run an error stopped before it checked anything (a configuration it cannot use): no
    results, and a failed invocation whose notification is the error, so code scanning shows why."""
    invocation = {"executionSuccessful": False, "toolExecutionNotifications": [_notification(message)]}
    return _log({"tool": {"driver": _driver([])}, "invocations": [invocation], "results": []})
