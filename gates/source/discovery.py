"""Which files a run checks: the files named, whatever their suffix, and the Python sources under the folders.

Inside a git work tree the answer is git's (tracked files plus untracked ones that are not ignored), so a
generated or vendored file the project ignores is not judged; elsewhere, and for a folder named explicitly
that git ignores as a whole, a walk that skips the usual environment and build folders.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

PYTHON_SUFFIXES = (".py", ".pyi")
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", "site-packages", "build", "dist", ".tox", ".nox"}
    | {".venv", "venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".corral_cache", ".eggs"}
)


def discover(paths: Iterable[str]) -> list[str]:
    """Absolute paths of the files named in `paths` and of the Python files under its folders, without
    duplicates, sorted.

    A path that cannot be followed (a dangling link, a link loop) or a folder that cannot be listed is
    returned too: reading it fails, and that failure is a CRL001 finding rather than a silent skip."""
    return sorted(iter_files(paths))


def iter_files(paths: Iterable[str]) -> Iterator[str]:
    """The files of `discover`, each once, in the order they are found (a walk yields as it goes, so the
    files found first can be checked while the rest are still being looked for)."""
    seen: set[str] = set()
    for given in paths:
        path = os.path.realpath(given)
        if os.path.isfile(path):
            # Named explicitly, a file is checked whatever its suffix (as ruff): pre-commit passes a script
            # with a Python shebang, `scripts/manage`, and skipping it would be a silent pass.
            files: Iterable[str] = (path,)
        elif os.path.isdir(path):
            listed = _git_files(path)
            if listed == [] and _git_ignores(path):
                # A folder named explicitly is checked even when git ignores it (a virtualenv's
                # site-packages, a generated tree): checking nothing would be a silent pass.
                listed = None
            files = listed if listed is not None else _walk(path)
        elif os.path.lexists(given):  # a FIFO, a device, a dangling link: reading it reports why (CRL001)
            files = (os.path.abspath(given),)
        else:
            raise FileNotFoundError(given)
        for file in files:
            if file not in seen:
                seen.add(file)
                yield file


def _git_files(directory: str) -> list[str] | None:
    """Files git tracks or would track under `directory`; None when it is not inside a work tree."""
    if not _may_be_in_work_tree(directory):
        return None
    import subprocess

    try:
        completed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "."],
            cwd=directory,
            capture_output=True,
            check=False,
        )
    except OSError:
        return None
    if completed.returncode != 0:
        return None
    files = []
    for name in completed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if name.endswith(PYTHON_SUFFIXES):
            file = os.path.join(directory, name)
            # A tracked file deleted from the work tree is not there to check; a broken link is.
            if os.path.lexists(file):
                files.append(file)
    return files


def _may_be_in_work_tree(directory: str) -> bool:
    """False only when git cannot see a work tree here: no `.git` in the folder or above it, and no
    `GIT_DIR` naming one elsewhere (so a plain folder costs no git process)."""
    if "GIT_DIR" in os.environ:
        return True
    current = directory
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent


def git_top_level(directory: str) -> str | None:
    """The top of the git work tree holding `directory`, None outside one (or where git cannot say)."""
    if not _may_be_in_work_tree(directory):
        return None
    import subprocess

    try:
        completed = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=directory, capture_output=True, check=False
        )
    except OSError:
        return None
    top = completed.stdout.decode("utf-8", "surrogateescape").rstrip("\n")
    return os.path.realpath(top) if completed.returncode == 0 and top else None


def _git_ignores(directory: str) -> bool:
    import subprocess

    try:
        completed = subprocess.run(["git", "check-ignore", "-q", "."], cwd=directory, capture_output=True, check=False)
    except OSError:
        return False
    return completed.returncode == 0


def _walk(directory: str) -> Iterator[str]:
    pending = [directory]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            if current == directory:
                raise
            yield current  # reading it reports why it cannot be listed
            continue
        # A folder holding pyvenv.cfg is a virtualenv, whatever its name.
        if current != directory and any(entry.name == "pyvenv.cfg" for entry in entries):
            continue
        for entry in entries:
            name = entry.name
            if name.endswith(PYTHON_SUFFIXES):
                try:
                    # Anything but a folder: a FIFO or a device is reported (CRL001), never skipped.
                    is_file = entry.is_symlink() or not entry.is_dir(follow_symlinks=False)
                except OSError:  # a link loop: reading it reports the error
                    is_file = True
                if is_file:
                    yield entry.path
                    continue
            if name not in SKIPPED_DIRS and _is_real_dir(entry):
                pending.append(entry.path)


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def module_name_for(relpath: str, root: str | os.PathLike[str] | None = None) -> tuple[str, bool]:
    """The dotted module name of a file, and whether it is a package. Named from the project root, or with
    `root` (the project's absolute root) from the file's `package_root`: `apps/api/proj/tasks.py`, in a
    package whose parent `apps/api` is none, is `proj.tasks`, as the service running there imports it."""
    if root is not None:
        relpath = relpath[len(package_root(root, relpath)) :]
    stem = relpath.rsplit(".", 1)[0]
    parts = [part for part in stem.split("/") if part]
    is_package = bool(parts) and parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


# Whether a folder (absolute path) holds an `__init__.py`, asked once per run (`forget_packages`).
_IS_PACKAGE: dict[str, bool] = {}


def package_root(root: str | os.PathLike[str], relpath: str) -> str:
    """The folder below the project root (relative, `/`-terminated; "" for the root itself) that the file's
    top package sits in: climbing from the file's folder while it holds an `__init__.py`, the first one that
    does not. A monorepo's service (`apps/api/manage.py` beside the package `apps/api/proj/`) and a `src/`
    layout run with that folder on the import path. A file whose own folder is no package is named from the
    project root, as a namespace package run from there."""
    parts = relpath.split("/")[:-1]
    if not parts or parts[0] == "..":
        return ""
    base = os.fspath(root)
    depth = len(parts)
    while depth and _is_package(os.path.join(base, *parts[:depth])):
        depth -= 1
    if depth == len(parts) or not depth:
        return ""
    return "/".join(parts[:depth]) + "/"


def import_folder(root: str | os.PathLike[str], relpath: str) -> tuple[str, tuple[str, bool] | None]:
    """Where the file's own absolute imports resolve when it runs: its package root when its folder is a
    package, else its own folder (a script such as `apps/api/manage.py` runs with it first on the import
    path); with the `__init__.py` (relative path) that decided it and whether it exists."""
    folder = relpath.rpartition("/")[0]
    if not folder:
        return "", None
    is_package = _is_package(os.path.join(os.fspath(root), folder))
    return (package_root(root, relpath) if is_package else folder + "/"), (f"{folder}/__init__.py", is_package)


def package_markers(root: str | os.PathLike[str], relpath: str) -> list[tuple[str, bool]]:
    """The `__init__.py` files (relative paths) `package_root` asked about for `relpath`, and whether each
    exists: what a cached answer naming the file's module depends on."""
    parts = relpath.split("/")[:-1]
    if len(parts) < 2 or parts[0] == "..":
        return []  # a file at the root or one folder below it is named from the root whatever they hold
    base = os.fspath(root)
    markers = []
    for depth in range(len(parts), 0, -1):
        exists = _is_package(os.path.join(base, *parts[:depth]))
        markers.append(("/".join([*parts[:depth], "__init__.py"]), exists))
        if not exists:
            break
    return markers


def _is_package(folder: str) -> bool:
    known = _IS_PACKAGE.get(folder)
    if known is None:
        known = _IS_PACKAGE[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
    return known


def forget_packages() -> None:
    """A new run: folders are asked again whether they are packages."""
    _IS_PACKAGE.clear()
