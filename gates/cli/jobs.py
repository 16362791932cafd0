"""`corral jobs --static`: every job kind of the project with its effective hard timeout, read from the code."""

from __future__ import annotations

import json
import sys

from corral.gates.config import Config
from corral.gates.engine.projects import check_projects, config_errors, find_projects
from corral.gates.rules.job_report import JobsReport, render_jobs


def jobs_command(paths: list[str], config_file: str | None, *, strict: bool, as_json: bool) -> int:
    """`corral jobs --static [PATH...]`: the report alone (exit 0), or 2 on a usage or configuration error.
    Each file's kinds are read with its own project's settings; a monorepo's projects report one after
    another, each path relative to its project's root."""

    def adjust(config: Config) -> Config:
        # The report lists every job kind whatever `select` rolls out: it is what CRL2 would judge.
        config = config._replace(select=())
        return config._replace(strict=True) if strict else config

    result = check_projects(find_projects(paths, config_file), adjust)
    kinds = result.reports.get(JobsReport.REPORT, [])
    if as_json:
        document = {"version": 1, "root": str(result.root), JobsReport.REPORT: kinds}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render_jobs(kinds))
    unusable = config_errors(result)
    for finding in unusable:  # a project whose kinds could not be read: the report is incomplete
        print(f"corral: {finding.message}", file=sys.stderr)
    return 2 if unusable else 0
