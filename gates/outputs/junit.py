"""`--format junit`: JUnit XML, one test case per rule family (CRL0, CRL1, ...) that fails listing its findings."""

from __future__ import annotations

import re

from corral.gates.engine.run import CheckResult
from corral.gates.findings import Finding, code_family
from corral.gates.outputs.shared import code_table, located, plural, repository_top

# Compiled on first use (by `re`'s own cache): the character ranges cost milliseconds to compile, and most
# runs write other formats.
_XML_ILLEGAL = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def _xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold at all (escaping is ElementTree's job)."""
    return re.sub(_XML_ILLEGAL, "\ufffd", text)


def render_junit(result: CheckResult) -> str:
    """A test case for every family of the code table, failing with its findings when it has any."""
    import xml.etree.ElementTree as ET

    families: dict[str, list[Finding]] = {code_family(code): [] for code in code_table(result)}
    for place in located(result, repository_top(result)):  # each named where the repository has its file
        families[code_family(place.finding.code)].append(place.finding._replace(path=place.for_ci))
    failures = sum(1 for found in families.values() if found)
    counts = {"tests": str(len(families)), "failures": str(failures), "errors": "0", "skipped": "0"}
    suites = ET.Element("testsuites", {"name": "corral", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": "corral check", **counts})
    for family, found in families.items():
        case = ET.SubElement(suite, "testcase", {"classname": "corral", "name": family})
        if found:
            failure = ET.SubElement(case, "failure", {"type": family, "message": plural(len(found), "finding")})
            failure.text = _xml_text("\n".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}" for f in found))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
