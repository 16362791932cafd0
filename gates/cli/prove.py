"""`corral prove`: a gate that has never been red proves nothing.

Copies the project to a scratch directory, plants one violation per rule family (CRL4: a network call and an
enqueue, one each) where the project gives the family something to attach to, runs the gate on the copy and
reports, per family, whether it went red on exactly the planted line. The project itself is never touched.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import Config, load_config
from corral.gates.engine.run import CheckResult, check_paths
from corral.gates.findings import code_family
from corral.gates.frameworks import BY_NAME, FRAMEWORKS
from corral.gates.rules.base import EngineCodes
from corral.gates.rules.connection_budget import ConnectionBudget, ConnectionBudgetCheck
from corral.gates.rules.job_report import JobsReport
from corral.gates.rules.job_timeouts import JobTimeouts
from corral.gates.rules.network_in_transaction import NetworkInTransaction
from corral.gates.rules.unmanaged_concurrency import UnmanagedConcurrency
from corral.gates.source.discovery import SKIPPED_DIRS

MARK = "  # planted by corral prove"


class Plant(NamedTuple):
    """Where a planted violation stands: the line its rule family must report."""

    relpath: str
    line: int


class Scratch(NamedTuple):
    """The copied project: its root, the settings that apply there, and the gate's verdict before planting."""

    root: Path
    config: Config
    baseline: CheckResult


Planter = Callable[[Scratch], "Plant | None"]


def _append(scratch: Scratch, relpath: str, lines: list[str], target: int) -> Plant:
    """Append `lines` to a file of the copy; `target` indexes the line the family must report."""
    path = scratch.root / relpath
    existing = path.read_text(encoding="utf-8")
    if existing and not existing.endswith("\n"):
        existing += "\n"
    start = existing.count("\n") + 2  # one blank line separates the planted code
    path.write_text(existing + "\n" + "".join(line + "\n" for line in lines), encoding="utf-8")
    return Plant(relpath, start + target)


def _domain_module(scratch: Scratch) -> str | None:
    """A module the domain rules judge: not infra, not tests, and checkable."""
    uncheckable = {finding.path for finding in scratch.baseline.findings if finding.code == EngineCodes.UNCHECKABLE}
    for relpath in sorted(scratch.baseline.results):
        if (
            relpath.endswith(".py")
            and not relpath.startswith("../")
            and relpath not in uncheckable
            and not scratch.config.is_infra(relpath)
            and not scratch.config.is_test(relpath)
        ):
            return relpath
    return None


def _append_to_domain_module(scratch: Scratch, lines: list[str], target: int) -> Plant | None:
    """`_append` to the first module the domain rules judge (None when there is none)."""
    relpath = _domain_module(scratch)
    return _append(scratch, relpath, lines, target) if relpath is not None else None


def plant_unmanaged_thread(scratch: Scratch) -> Plant | None:
    lines = [
        f"import threading as _corral_prove_threading{MARK}",
        f"_corral_prove_threading.Thread(target=print){MARK}",
    ]
    return _append_to_domain_module(scratch, lines, 1)


def _in_django_transaction(
    scratch: Scratch, head: list[str], name: str, imports: list[str], statement: str
) -> Plant | None:
    """`head`, then a function `name` that runs `statement` inside `transaction.atomic()` (the line the family
    must report), appended to a domain module."""
    lines = [*head, f"def {name}() -> None:", *imports, "    from django.db import transaction"]
    lines += ["", "    with transaction.atomic():", f"        {statement}"]
    lines[0] += MARK
    return _append_to_domain_module(scratch, lines, len(lines) - 1)


def plant_call_in_transaction(scratch: Scratch) -> Plant | None:
    post = 'requests.post("https://corral-prove.invalid", timeout=1)'
    return _in_django_transaction(scratch, [], "_corral_prove_transaction", ["    import requests"], post)


def plant_enqueue_in_transaction(scratch: Scratch) -> Plant | None:
    """A task of its own, declared with the first framework's `enqueue_plant` (with a limit, so CRL2 stays
    quiet), enqueued inside `transaction.atomic()`: CRL402."""
    plant = next(framework.enqueue_plant for framework in FRAMEWORKS if framework.enqueue_plant is not None)
    decorator = "_corral_prove_task_decorator"
    task = [plant.imports.format(name=decorator), "", "", f"@{decorator}{plant.arguments}"]
    task += ["def _corral_prove_task() -> None:", "    return None", "", ""]
    return _in_django_transaction(scratch, task, "_corral_prove_enqueue", [], f"_corral_prove_task.{plant.method}()")


_DECORATOR = re.compile(r"@([A-Za-z_][\w.]*)")


def plant_job_without_timeout(scratch: Scratch) -> Plant | None:
    """Beside a job kind the project declares, one more on the same queue or app with no hard limit: its
    framework's decorator, copied, with the framework's `no_limit_arguments`."""
    for kind in scratch.baseline.reports.get(JobsReport.REPORT, []):
        framework = BY_NAME.get(str(kind.get("framework")))
        arguments = framework.no_limit_arguments if framework is not None else None
        path = scratch.root / str(kind.get("path"))
        if arguments is None or not path.is_file():
            continue
        source_lines = path.read_text(encoding="utf-8").splitlines()
        line = int(kind.get("line", 0))
        declaration = _DECORATOR.match(source_lines[line - 1]) if 0 < line <= len(source_lines) else None
        if declaration is None:
            continue  # declared by a call, or indented in a class or function: nothing to copy at top level
        lines = [
            f"@{declaration.group(1)}{arguments}{MARK}",
            "def _corral_prove_job(*args: object, **kwargs: object) -> None:",
            "    return None",
        ]
        return _append(scratch, str(kind["path"]), lines, 0)
    return None


def plant_one_worker_too_many(scratch: Scratch) -> Plant | None:
    """Raise a runtime's relay so its total is one over its limit (the finding is on its `Runtime(` line)."""
    for entry in scratch.baseline.reports.get(ConnectionBudgetCheck.REPORT, []):
        if not entry.get("ok"):
            continue
        path = scratch.root / entry["path"]
        source = path.read_text(encoding="utf-8")
        call = _call_at(source, entry["line"])
        if call is None:
            continue
        extra = entry["limit"] - entry["total"] + 1
        lines = source.splitlines(keepends=True)
        relay = next((keyword.value for keyword in call.keywords if keyword.arg == "relay"), None)
        if relay is not None:
            edits = [(relay.end_lineno or relay.lineno, relay.end_col_offset or 0, f") + {extra}")]
            edits.append((relay.lineno, relay.col_offset, "("))
        else:
            end_line, end_col = call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
            before = "".join(lines[: end_line - 1]) + lines[end_line - 1][:end_col]
            separator = "" if before.rstrip().endswith((",", "(")) else ", "
            edits = [(end_line, end_col, f"{separator}relay={1 + extra}")]
        for line, col, text in edits:  # right to left, so earlier columns stay valid
            encoded = lines[line - 1].encode("utf-8")
            lines[line - 1] = (encoded[:col] + text.encode("utf-8") + encoded[col:]).decode("utf-8")
        path.write_text("".join(lines), encoding="utf-8")
        return Plant(entry["path"], entry["line"])
    return None


def _call_at(source: str, line: int) -> ast.Call | None:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.lineno == line:
            function = node.func
            called = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
            if called == "Runtime":
                return node
    return None


# One planter per rule family, named by the rule whose codes it plants. In this order: the budget edit
# changes no line count, the appends only add lines at the ends of files.
PLANTERS: list[tuple[str, str, Planter]] = [
    (ConnectionBudget.family(), "one worker too many for the pool", plant_one_worker_too_many),
    (UnmanagedConcurrency.family(), "a thread started in a domain module", plant_unmanaged_thread),
    (JobTimeouts.family(), "a job kind without a hard timeout", plant_job_without_timeout),
    (NetworkInTransaction.family(), "a network call inside a transaction", plant_call_in_transaction),
    (NetworkInTransaction.family(), "a job enqueued inside a transaction", plant_enqueue_in_transaction),
]


def _copy_project(root: Path, destination: Path) -> None:
    # A root that holds the temporary directory (a project under /tmp with no configuration of its own)
    # would otherwise copy the copy into itself until the disk is full.
    scratch = destination.parent

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {
            name
            for name in names
            if name in SKIPPED_DIRS
            or (Path(directory) / name / "pyvenv.cfg").exists()
            or Path(directory) / name == scratch
        }

    shutil.copytree(root, destination, ignore=ignore, symlinks=True)


def prove(path: str, config_file: str | None, *, as_json: bool = False) -> int:
    config = load_config([path], config_file)
    target = Path(path).resolve()
    if not target.exists():
        raise FileNotFoundError(path)
    with tempfile.TemporaryDirectory(prefix="corral-prove-") as scratch_dir:
        copy = Path(scratch_dir).resolve() / "project"
        _copy_project(config.root, copy)
        copy_config = config._replace(root=copy, source=copy / config.source.name if config.source else None)
        copy_target = str(copy / target.relative_to(config.root)) if target != config.root else str(copy)
        baseline = check_paths([copy_target], copy_config, use_cache=False)
        scratch = Scratch(copy, copy_config, baseline)
        rows: list[dict[str, Any]] = []
        for family, what, planter in PLANTERS:
            plant = planter(scratch)
            rows.append({"family": family, "violation": what, "planted": plant})
        result = check_paths([copy_target], copy_config, use_cache=False)
    red_lines = {(finding.path, finding.line, code_family(finding.code)) for finding in result.findings}
    for row in rows:
        plant = row["planted"]
        row["red"] = plant is not None and (plant.relpath, plant.line, row["family"]) in red_lines
    rows.sort(key=lambda row: row["family"])
    planted = [row for row in rows if row["planted"] is not None]
    ok = bool(planted) and all(row["red"] for row in planted)
    if as_json:
        document = [
            {
                "family": row["family"],
                "violation": row["violation"],
                "where": f"{row['planted'].relpath}:{row['planted'].line}" if row["planted"] else None,
                "red": row["red"],
            }
            for row in rows
        ]
        print(json.dumps({"ok": ok, "plants": document}, indent=2))
    else:
        print(f"{'family':<7} {'violation':<40} {'planted at':<44} gate")
        for row in rows:
            plant = row["planted"]
            where = f"{plant.relpath}:{plant.line}" if plant else "nothing to attach to"
            verdict = ("red" if row["red"] else "NOT RED") if plant else "-"
            print(f"{row['family']:<7} {row['violation']:<40} {where:<44} {verdict}")
        if not planted:
            print("nothing to plant: the project gives no rule family anything to attach to")
        else:
            print("every planted violation was reported" if ok else "the gate missed a planted violation")
    return 0 if ok else 1
