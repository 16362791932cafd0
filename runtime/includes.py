"""The modules that declare a runtime's job kinds: ``Runtime(include=[...])`` and ``corral worker --include``.

Owns the check of their names and their import. In the usual layout the queues and the
:class:`~corral.runtime.Runtime` live in one module and the jobs in others that import the queues
from it, so the runtime's module cannot import the job modules itself (a cycle); the runtime imports
them at ``start()``, before it claims, relays or schedules anything, so a worker started as
``corral worker app.runtime:runtime`` knows every kind its queues hold.
"""

from __future__ import annotations

import importlib
import os
import re
import sysconfig
import traceback
from collections.abc import Sequence

from corral.runtime.errors import ConfigError

__all__ = ["MODULE_PATTERN", "check_modules", "describe_import_failure", "import_modules"]

# Dotted names of importable modules only (no paths, no relative names, no attributes after a colon):
# a strict pattern makes a typo a ConfigError at construction, not an ImportError at start.
MODULE_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_modules(label: str, modules: object) -> tuple[str, ...]:
    """``modules`` as a tuple of dotted module names, or a :class:`ConfigError` naming the bad one."""
    if isinstance(modules, str) or not isinstance(modules, Sequence):
        raise ConfigError(f"{label} must be a list of dotted module names (e.g. ['app.jobs']), got {modules!r}")
    for name in modules:
        if not isinstance(name, str) or not MODULE_PATTERN.fullmatch(name):
            raise ConfigError(f"invalid module name {name!r} in {label}: must be a dotted module name like app.jobs")
    return tuple(modules)


def import_modules(label: str, modules: Sequence[str]) -> None:
    """Import each of ``modules`` (already checked), or raise a :class:`ConfigError` naming the module
    that could not be imported and why (its exception, with the file and line of a syntax error)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise ConfigError(f"{label} module {name!r} cannot be imported: {describe_import_failure(exc)}") from exc


def describe_import_failure(exc: Exception) -> str:
    """The error a module raised while it was imported, with where in its code: one line, no traceback."""
    if isinstance(exc, SyntaxError):
        # Raised by the compiler, not from a frame of the module: the error itself says where.
        return f"SyntaxError: {exc.msg} (at {exc.filename}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    # Frames of the import machinery and of corral are not where the user's module failed; of the others, the
    # innermost outside the standard library and installed packages is the user's line (os.environ["X"]
    # raises inside <frozen os>), else the innermost.
    corral_dir = os.path.dirname(os.path.dirname(__file__))
    ours = [
        frame
        for frame in frames
        if "importlib" not in frame.filename and not frame.filename.startswith(os.path.join(corral_dir, ""))
    ]
    users = [frame for frame in ours if not _library_file(frame.filename)]
    where = next((f" (at {frame.filename}:{frame.lineno})" for frame in reversed(users or ours)), "")
    return f"{type(exc).__name__}: {exc}{where}"


def _library_file(filename: str) -> bool:
    """Whether ``filename`` is the standard library's or an installed package's (not the user's code)."""
    if filename.startswith("<frozen "):
        return True
    paths = sysconfig.get_paths()
    libraries = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    return any(filename.startswith(os.path.join(library, "")) for library in libraries)
