"""`--format json`: the findings (each with its code's `docs_url`) and the whole-project checks' report sections,
as one JSON document. A finding's `path` is relative to its project's root, `absolute_path` is the file's."""

from __future__ import annotations

import json

from corral.gates.engine.run import CheckResult
from corral.gates.outputs.rule_docs import docs_url
from corral.gates.outputs.shared import located


def render_json(result: CheckResult) -> str:
    document = {
        "version": 1,
        "root": str(result.root),
        "files": result.files,
        "findings": [
            {**place.finding.as_dict(), "absolute_path": place.absolute, "docs_url": docs_url(place.finding.code)}
            for place in located(result)
        ],
        **result.reports,
    }
    if result.not_run:  # only a run narrowed by `select` left anything out
        document["not_run"] = list(result.not_run)
    return json.dumps(document, indent=2) + "\n"
