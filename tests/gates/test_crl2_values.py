"""The static evaluator (`corral.gates.analysis.values`), the API CRL2 and CRL3 share: numbers, names, modules."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from corral.gates.analysis.context import FileContext
from corral.gates.analysis.names import ModuleNames
from corral.gates.analysis.values import Located, StaticValues, Unresolved
from corral.gates.config import Config


def evaluator(source: str, root: Path = Path("/project"), relpath: str = "app/m.py") -> StaticValues:
    text = textwrap.dedent(source)
    tree = ast.parse(text)
    context = FileContext(
        relpath=relpath,
        text=text,
        tree=tree,
        names=ModuleNames(tree, relpath[:-3].replace("/", ".")),
        config=Config(root=root),
        is_infra=False,
        is_test=False,
    )
    return StaticValues.of(context)


def value_of(source: str, expression: str, **where: object) -> object:
    values = evaluator(source, **where)  # type: ignore[arg-type]
    return values.number(ast.parse(expression, mode="eval").body)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("30", 30.0),
        ("-2.5", -2.5),
        ("2 * 60 + 5", 125.0),
        ("7 // 2", 3.0),
        ("None", None),
        ("int('20')", 20.0),
        ("float(LIMIT) / 2", 15.0),
        ("min(LIMIT, 10)", 10.0),
        ("timedelta(minutes=2, seconds=3)", 123.0),
        ("datetime.timedelta(1)", 86400.0),
        ("DELTA.total_seconds()", 600.0),
        ("int(os.environ.get('N', '20'))", 20.0),
        ("float(os.getenv('N', default=1.5))", 1.5),
        ("LIMIT * 2", 60.0),
        ("Limits.HARD", 45.0),
    ],
)
def test_numbers(expression: str, expected: float | None) -> None:
    source = """
    import os
    import datetime
    from datetime import timedelta
    LIMIT = 30
    DELTA = timedelta(minutes=10)
    class Limits:
        HARD = LIMIT + 15
    """
    assert value_of(source, expression) == expected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("os.environ['N']", "reads the environment with no static default"),
        ("os.getenv('N')", "reads the environment with no static default"),
        ("TWICE", "TWICE is bound more than once (lines 3, 4)"),
        ("compute()", "is a call the gate cannot evaluate"),
        ("1 / 0", "has no finite value"),
        ("float('inf')", "is not a finite number"),
        ("'ten'", "'ten' is not a number"),
        ("True", "True is not a number"),
        ("settings.X", "settings.X is not defined in a module of this project"),
        ("UNDEFINED", "app/m.py defines no module-level UNDEFINED"),
    ],
)
def test_unresolved_values_say_why(expression: str, reason: str) -> None:
    source = """
    import os, settings
    TWICE = 1
    TWICE = 2
    """
    found = value_of(source, expression)
    assert isinstance(found, Unresolved)
    assert reason in found.reason
    assert found.where.startswith("app/m.py:")


def test_values_from_other_project_modules(tmp_path: Path) -> None:
    (tmp_path / "src" / "svc").mkdir(parents=True)
    (tmp_path / "src" / "svc" / "__init__.py").write_text("")
    (tmp_path / "src" / "svc" / "config.py").write_text("from .base import *\nWORKERS = BASE * 2\n")
    (tmp_path / "src" / "svc" / "base.py").write_text("BASE = 4\n")
    (tmp_path / "settings.py").write_text("RELAY = 1\n")
    source = """
    import settings
    from svc.config import WORKERS
    from . import base
    """
    values = evaluator(source, root=tmp_path, relpath="src/svc/pool.py")
    assert values.number(ast.parse("WORKERS + settings.RELAY", mode="eval").body) == 9.0
    assert values.number(ast.parse("base.BASE", mode="eval").body) == 4.0
    assert {"src/svc/config.py", "src/svc/base.py", "settings.py"} <= set(values.project.dependencies)
    # `src/` is the file's package root, looked in first: probed and missing is still a dependency, and so
    # is the `__init__.py` that makes `src/svc` a package.
    assert values.project.dependencies["src/settings.py"] == (0, -1, "")
    assert values.project.dependencies["*exists:src/svc/__init__.py"] == (0, 0, "1")


def django_project(root: Path, **settings_modules: str) -> None:
    """A Django project under `root`: `app/settings.py` and `app/prod.py`, and each file of `settings_modules`
    (path -> the module its `os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)` names)."""
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "settings.py").write_text("TASK_TIME_LIMIT = 120\n")
    (root / "app" / "prod.py").write_text("from app.settings import *\nTASK_TIME_LIMIT = 300\n")
    for filename, module in settings_modules.items():
        (root / f"{filename}.py").write_text(
            f"import os\n\ndef main():\n    os.environ.setdefault('DJANGO_SETTINGS_MODULE', {module!r})\n"
        )


DJANGO_TASKS = "from django.conf import settings\n"
TIME_LIMIT = ast.parse("settings.TASK_TIME_LIMIT", mode="eval").body


def test_django_settings_are_read_in_the_module_django_settings_module_names(tmp_path: Path) -> None:
    django_project(tmp_path, manage="app.settings", wsgi="app.settings")
    values = evaluator(DJANGO_TASKS, root=tmp_path, relpath="app/tasks.py")
    assert values.number(TIME_LIMIT) == 120.0
    assert {"manage.py", "wsgi.py", "app/settings.py"} <= set(values.project.dependencies)
    missing = values.number(ast.parse("settings.OTHER_LIMIT", mode="eval").body)
    assert isinstance(missing, Unresolved) and "app/settings.py defines no module-level OTHER_LIMIT" in missing.reason


def test_django_settings_named_twice_or_never_are_unresolved_with_the_places(tmp_path: Path) -> None:
    django_project(tmp_path, manage="app.settings", wsgi="app.prod")
    found = evaluator(DJANGO_TASKS, root=tmp_path, relpath="app/tasks.py").number(TIME_LIMIT)
    assert isinstance(found, Unresolved)
    assert "DJANGO_SETTINGS_MODULE names more than one module: app.prod (wsgi.py:4); app.settings (manage.py:4)" in (
        found.reason
    )
    (tmp_path / "manage.py").unlink()
    (tmp_path / "wsgi.py").unlink()
    found = evaluator(DJANGO_TASKS, root=tmp_path, relpath="app/tasks.py").number(TIME_LIMIT)
    assert isinstance(found, Unresolved) and "names its settings module" in found.reason


def test_definition_follows_imports_to_the_declaring_module(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "queues.py").write_text(
        "from corral.runtime import Queue\nindex = Queue('index', max_workers=4)\n"
    )
    values = evaluator("from app.queues import index\n", root=tmp_path, relpath="app/jobs.py")
    located = values.definition(ast.parse("index", mode="eval").body)
    assert isinstance(located, Located) and isinstance(located.node, ast.Call)
    assert located.values.module.relpath == "app/queues.py"
    assert located.values.dotted(located.node.func) == "corral.runtime.Queue"


def test_import_cycles_do_not_hang(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from b import X\n")
    (tmp_path / "b.py").write_text("from a import X\n")
    found = evaluator("from a import X\n", root=tmp_path, relpath="c.py").number(ast.parse("X", mode="eval").body)
    assert isinstance(found, Unresolved)


def test_local_names_are_not_constants() -> None:
    values = evaluator("def f(limit):\n    return limit\n")
    function = values.module.tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    found = values.number(ast.parse("limit", mode="eval").body, values.module.names.scope_of(function))
    assert isinstance(found, Unresolved) and "local name" in found.reason
