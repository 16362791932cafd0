"""Optional exporters built on the ``on_event`` hooks: Prometheus metrics and OpenTelemetry spans.

Each is one hook (pass it in ``Runtime(on_event=[...])``) and needs its extra: ``corral[prometheus]``
(:mod:`corral.runtime.exporters.prometheus`) or ``corral[otel]`` (:mod:`corral.runtime.exporters.otel`).
The libraries are imported when an exporter is built, never by the runtime itself, so the runtime
runs without them; building one without its library is a ConfigError naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from corral.runtime.errors import ConfigError

__all__ = ["import_extra"]


def import_extra(module: str, *, extra: str) -> ModuleType:
    """``module``, imported now; a ConfigError naming ``corral[extra]`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{module} is not installed: pip install 'corral[{extra}]' ({exc})") from exc
