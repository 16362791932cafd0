"""What the benchmark scripts share: the Django source they measure on, and a timed run of a command."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# Outside the repository: its .gitignore and pyproject.toml must not apply to the benchmark tree.
WORK = Path(tempfile.gettempdir()) / "corral-bench"


def fetch_django(version: str) -> Path:
    """Django's source from its wheel (downloaded once with pip), unpacked under WORK."""
    source = WORK / f"django-{version}"
    if (source / "django").is_dir():
        return source
    WORK.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"django=={version}", "-d", str(WORK)],
        check=True,
    )
    (wheel,) = WORK.glob(f"[Dd]jango-{version}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(source)
    return source


def timed(command: list[str], cwd: Path) -> float:
    """Wall time of one run; exit 0 or 1 (findings) is a measurement, anything else stops the benchmark."""
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{command[0]} failed ({completed.returncode}): {completed.stderr}")
    return elapsed
