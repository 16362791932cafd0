"""What the benchmark scripts share: the real projects they measure on (Django's source, saleor's), and a timed
run of a command."""

from __future__ import annotations

import compileall
import importlib.util
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import NamedTuple

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


def fetch_saleor(repository: str) -> Path:
    """saleor's source at the newest commit of `repository` (a git directory or a URL: cloned once, bare and
    shallow, under WORK), exported under WORK as a plain tree, as Django's wheel is: not a git work tree."""
    WORK.mkdir(exist_ok=True)
    git_dir = Path(repository)
    if not git_dir.is_dir():
        git_dir = WORK / "saleor.git"
        if not git_dir.is_dir():
            subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", repository, str(git_dir)], check=True)
    head = ["git", "--git-dir", str(git_dir)]
    commit = subprocess.run([*head, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    source = WORK / f"saleor-{commit[:12]}"
    if (source / "saleor").is_dir():
        return source
    unpacking = WORK / f"{source.name}.unpacking"
    shutil.rmtree(unpacking, ignore_errors=True)
    unpacking.mkdir()
    archive = subprocess.Popen([*head, "archive", "HEAD"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(unpacking)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive failed in {git_dir}")
    unpacking.rename(source)
    return source


def compile_corral() -> None:
    """Byte-compile the corral being measured, as `pip install` does for a wheel.

    An editable install only gets its bytecode on a first import that may write it; under
    PYTHONDONTWRITEBYTECODE (set in CI) every run would compile corral's modules again, a cost no
    installed corral pays."""
    spec = importlib.util.find_spec("corral")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("corral is not installed in this interpreter")
    for location in spec.submodule_search_locations:
        compileall.compile_dir(location, quiet=1)


class Timing(NamedTuple):
    """One run's wall time and the CPU time (user + system) of its whole process tree, in seconds."""

    wall: float
    cpu: float


def measure(command: list[str], cwd: Path) -> Timing:
    """Time one run; exit 0 or 1 (findings) is a measurement, anything else stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{command[0]} failed ({completed.returncode}): {completed.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(elapsed, cpu)


def timed(command: list[str], cwd: Path) -> float:
    """Wall time of one run (see `measure`)."""
    return measure(command, cwd).wall
