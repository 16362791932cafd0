"""`--format gitlab`: a GitLab Code Quality report, the JSON array of issues GitLab shows in a merge request.

Each finding is one issue with GitLab's documented fields: `description` (the code and message), `check_name`
(the code), `fingerprint`, `severity` (`major`: every finding fails the gate) and `location` (`path`, relative
to the repository's top as GitLab places it whatever folder the gate ran in, and `lines.begin`/`lines.end`).
GitLab keeps one issue per fingerprint, so it is unique per finding: a hash of that path, the code and the
baseline's fingerprint of the line (which stays the same when code moves)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import located_fingerprinted, repository_top


def render_gitlab(result: CheckResult) -> str:
    issues: list[dict[str, Any]] = []
    for place, marked in located_fingerprinted(result, repository_top(result)):
        finding = marked.finding
        key = f"{place.for_ci}\0{finding.code}\0{marked.fingerprint}:{marked.occurrence}"
        lines = {"begin": finding.line, "end": max(finding.end_line, finding.line)}
        issues.append(
            {
                "description": f"{finding.code} {finding.message}",
                "check_name": finding.code,
                "fingerprint": hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest(),
                "severity": "major",
                "location": {"path": place.for_ci, "lines": lines},
            }
        )
    return json.dumps(issues, indent=2) + "\n"
