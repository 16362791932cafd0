"""`corral jobs --static`: every job kind of the project with its effective hard timeout, read from the code."""

from __future__ import annotations

import json
import sys

from corral.gates.config import load_config
from corral.gates.engine.run import check_paths
from corral.gates.rules.job_report import JobsReport, render_jobs


def jobs_command(paths: list[str], config_file: str | None, *, strict: bool, as_json: bool) -> int:
    """`corral jobs --static [PATH...]`: the report alone (exit 0), or 2 on a usage or configuration error."""
    # The report lists every job kind whatever `select` rolls out: it is what CRL2 would judge.
    config = load_config(paths, config_file)._replace(select=())
    if strict:
        config = config._replace(strict=True)
    result = check_paths(paths, config)
    kinds = result.reports.get(JobsReport.REPORT, [])
    if as_json:
        document = {"version": 1, "root": str(result.root), JobsReport.REPORT: kinds}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render_jobs(kinds))
    return 0
