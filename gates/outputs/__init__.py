"""How a run's findings are written: one module per `--format`, registered in `FORMATS`.

`text` and `json` for people and scripts; for CI: `github` (workflow commands that annotate the diff),
`sarif` (code scanning), `markdown` (the job summary, from `templates/summary.md.j2`), `junit` (a test case
per finding, for CI systems that show test reports) and `gitlab` (GitLab's Code Quality report). What several
share (the summary line, the code table a run's findings are shown against) is in `shared`; what links a code
to its documentation in `rule_docs`, and the fingerprint that follows a finding across line moves in
`fingerprints`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from corral.gates.engine.run import CheckResult

Renderer = Callable[["CheckResult"], str]

# Format name -> the module of this package and its renderer.
_RENDERERS: dict[str, tuple[str, str]] = {
    "text": ("text", "render_text"),
    "json": ("json", "render_json"),
    "github": ("github", "render_github"),
    "sarif": ("sarif", "render_sarif"),
    "markdown": ("markdown", "render_markdown"),
    "junit": ("junit", "render_junit"),
    "gitlab": ("gitlab", "render_gitlab"),
}


class _Formats(Mapping[str, Renderer]):
    """The renderers by format name, each module imported when its format is asked for: a run writes one or
    two of them, and most of a warm run's time is its start-up."""

    def __getitem__(self, name: str) -> Renderer:
        module, function = _RENDERERS[name]
        return cast(Renderer, getattr(importlib.import_module(f"corral.gates.outputs.{module}"), function))

    def __iter__(self) -> Iterator[str]:
        return iter(_RENDERERS)

    def __len__(self) -> int:
        return len(_RENDERERS)


FORMATS: Mapping[str, Renderer] = _Formats()

__all__ = ["FORMATS", "Renderer"]
