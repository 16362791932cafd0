"""`--format json`: the findings and the whole-project checks' report sections, as one JSON document. A
finding's `path` is relative to its project's root, `absolute_path` is the file's."""

from __future__ import annotations

import json

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.shared import located


def render_json(result: CheckResult) -> str:
    document = {
        "version": 1,
        "root": str(result.root),
        "files": result.files,
        "findings": [{**place.finding.as_dict(), "absolute_path": place.absolute} for place in located(result)],
        **result.reports,
    }
    if result.not_run:  # only a run narrowed by `select` left anything out
        document["not_run"] = list(result.not_run)
    return json.dumps(document, indent=2) + "\n"
