"""`--format junit`: JUnit XML for CI systems that show test reports. One test suite per rule family (CRL0,
CRL1, ...), one failing test case per finding with its `file` and `line`, and one passing case for a family
with no finding (a skipped one for a family `select` left out), so a clean run still shows what ran."""

from __future__ import annotations

import re

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding, code_family
from corral.gates.outputs.rule_docs import docs_url
from corral.gates.outputs.shared import code_table, located, repository_top

# Compiled on first use (by `re`'s own cache): the character ranges cost milliseconds to compile, and most
# runs write other formats.
_XML_ILLEGAL = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def _xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold at all (escaping is ElementTree's job)."""
    return re.sub(_XML_ILLEGAL, "\ufffd", text)


def _counts(tests: int, failures: int, skipped: int) -> dict[str, str]:
    return {"tests": str(tests), "failures": str(failures), "errors": "0", "skipped": str(skipped)}


def render_junit(result: CheckResult) -> str:
    """A suite for every family of the code table, holding a failing case per finding of that family."""
    import xml.etree.ElementTree as ET

    families: dict[str, list[Finding]] = {code_family(code): [] for code in code_table(result)}
    for place in located(result, repository_top(result)):  # each named where the repository has its file
        families[code_family(place.finding.code)].append(place.finding._replace(path=place.for_ci))
    left_out = {family for family in families if family in result.not_run}
    cases = sum(max(len(found), 1) for found in families.values())
    suites = ET.Element("testsuites", {"name": "corral", **_counts(cases, len(result.findings), len(left_out))})
    for family, found in families.items():
        skipped = family in left_out
        counts = _counts(max(len(found), 1), len(found), int(skipped))
        suite = ET.SubElement(suites, "testsuite", {"name": family, **counts})
        if not found:
            case = ET.SubElement(suite, "testcase", {"classname": family, "name": f"{family}: no findings"})
            if skipped:
                ET.SubElement(case, "skipped", {"message": "not run: left out by select"})
        for finding in found:
            where = f"{finding.path}:{finding.line}:{finding.col}"
            attributes = {"classname": family, "name": f"{finding.code} {where}", "file": finding.path}
            case = ET.SubElement(suite, "testcase", {**attributes, "line": str(finding.line)})
            failure = ET.SubElement(case, "failure", {"type": finding.code, "message": _xml_text(finding.message)})
            failure.text = _xml_text(f"{where}: {finding.code} {finding.message}\n{docs_url(finding.code)}")
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
