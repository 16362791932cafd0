"""CRL1 across modules, through the real command: spawners re-exported by project modules, reported where
they are used, and the infra helpers that stay the escape."""

from __future__ import annotations

from pathlib import Path

from conftest import copy_project, run_corral
from expectations import FIXTURES

ORIGIN = "(threading.Thread re-exported by app/infra/compat.py:4)"


def test_reexported_spawners_are_reported_at_each_use_with_their_origin(tmp_path: Path) -> None:
    root = tmp_path / "reexports"
    copy_project(FIXTURES / "crl1_projects" / "reexports", root)
    completed = run_corral("check", cwd=root)
    assert completed.returncode == 1
    found = [line.split(" outside infra")[0] for line in completed.stdout.splitlines()[:-1]]
    assert found == [
        f"app/domain/orders.py:2:30: CRL101 Thread {ORIGIN}",
        "app/domain/orders.py:2:38: CRL103 ThreadPoolExecutor "
        "(concurrent.futures.ThreadPoolExecutor re-exported by app/infra/compat.py:7)",
        "app/domain/orders.py:3:30: CRL104 create_task (asyncio.create_task re-exported by app/infra/compat.py:11)",
        "app/domain/orders.py:6:22: CRL101 Thread "
        "(threading.Thread re-exported by app/shared.py:1, app/infra/compat.py:4)",
        f"app/domain/orders.py:10:5: CRL101 Thread {ORIGIN}",
        "app/domain/orders.py:11:12: CRL103 ThreadPoolExecutor "
        "(concurrent.futures.ThreadPoolExecutor re-exported by app/infra/compat.py:7)",
        f"app/domain/orders.py:12:5: CRL101 compat.Thread {ORIGIN}",
        "app/domain/orders.py:13:5: CRL104 spawn (asyncio.create_task re-exported by app/infra/compat.py:11)",
        "app/domain/orders.py:14:5: CRL101 SharedThread "
        "(threading.Thread re-exported by app/shared.py:1, app/infra/compat.py:4)",
        f"app/shared.py:1:30: CRL101 Thread {ORIGIN}",
    ]
    # The infra helpers (start_worker, the project's own Process class) are not findings.
    assert "orders.py:15:" not in completed.stdout and "orders.py:16:" not in completed.stdout

    # Infra turns Thread into a helper of its own: the cached verdicts of the modules using it follow.
    compat = root / "app" / "infra" / "compat.py"
    compat.write_text(
        compat.read_text().replace(
            "from threading import Thread\n",
            "import threading\n\n\nclass Thread:\n    def __init__(self, target):\n"
            "        threading.Thread(target=target).start()\n",
        )
    )
    completed = run_corral("check", cwd=root)
    assert "CRL101" not in completed.stdout
    assert "CRL103" in completed.stdout and "CRL104" in completed.stdout


def test_a_spawner_reached_as_an_attribute_of_an_imported_project_module_is_a_reexport(project) -> None:
    # `from app.infra import compat` names no spawner: the file is read for `compat.ThreadPoolExecutor`.
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/infra/__init__.py": "",
            "app/infra/compat.py": "from concurrent.futures import ThreadPoolExecutor\nfrom threading import Thread\n",
            "app/crunch.py": """
                from app.infra import compat
                def crunch(items):
                    with compat.ThreadPoolExecutor(4) as pool:
                        return list(pool.map(len, items))
                def later():
                    compat.Thread(target=print).start()
                """,
        }
    )
    completed = run_corral("check", cwd=root)
    found = [line.split(" outside infra")[0] for line in completed.stdout.splitlines()[:-1]]
    assert found == [
        "app/crunch.py:3:10: CRL103 compat.ThreadPoolExecutor "
        "(concurrent.futures.ThreadPoolExecutor re-exported by app/infra/compat.py:1)",
        "app/crunch.py:6:5: CRL101 compat.Thread (threading.Thread re-exported by app/infra/compat.py:2)",
    ]


def test_a_spawner_rebound_to_the_projects_own_class_is_not_a_reexport(project) -> None:
    # At module level the last unconditional `class`/`def`/import of a name is what importers get; a rebinding
    # under `if`/`try` keeps every candidate.
    root = project(
        {
            "pyproject.toml": "[tool.corral]\n",
            "app/__init__.py": "",
            "app/infra/__init__.py": "",
            "app/infra/managed.py": """
                from threading import Thread
                class Thread(Thread):
                    def __init__(self, target):
                        super().__init__(target=target, daemon=False)
                """,
            "app/infra/reimported.py": """
                class Thread:
                    pass
                from threading import Thread
                """,
            "app/infra/maybe.py": """
                import os
                from threading import Thread
                if os.environ.get("MANAGED"):
                    class Thread(Thread):
                        pass
                """,
            "app/use.py": """
                from app.infra.managed import Thread
                from app.infra.maybe import Thread as MaybeThread
                from app.infra.reimported import Thread as RawThread
                def go(f):
                    Thread(f).start()
                    MaybeThread(f).start()
                    RawThread(f).start()
                """,
        }
    )
    completed = run_corral("check", "--no-cache", cwd=root)
    found = [line.split(" outside infra")[0] for line in completed.stdout.splitlines()[:-1]]
    assert found == [
        "app/use.py:2:29: CRL101 Thread (threading.Thread re-exported by app/infra/maybe.py:2)",
        "app/use.py:3:34: CRL101 Thread (threading.Thread re-exported by app/infra/reimported.py:3)",
        "app/use.py:6:5: CRL101 MaybeThread (threading.Thread re-exported by app/infra/maybe.py:2)",
        "app/use.py:7:5: CRL101 RawThread (threading.Thread re-exported by app/infra/reimported.py:3)",
    ]
