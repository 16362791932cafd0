"""The distribution: one wheel that installs `corral.gates`, `corral.lint_plugins`, `corral.runtime` and
nothing else at the top of site-packages."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_holds_only_corral_and_its_metadata(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("corral-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"corral", next(top for top in tops if top.endswith(".dist-info"))}
    # Every package of the source tree is in the wheel (pyproject.toml lists them one by one).
    for init in sorted(
        path for top in ("gates", "lint_plugins", "runtime") for path in (REPO / top).rglob("__init__.py")
    ):
        assert f"corral/{init.relative_to(REPO).as_posix()}" in names, f"{init} is not packaged"
    for package in ("gates", "lint_plugins", "runtime"):
        assert f"corral/{package}/py.typed" in names
    # corral is a namespace shared by the three packages: no corral/__init__.py claims it.
    assert "corral/__init__.py" not in names
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "corral = corral.gates.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
