"""Procrastinate as a CRL2 framework: `@app.task` on a `procrastinate.App`.

Procrastinate has no hard timeout: the body must run inside `asyncio.timeout(N)` / `asyncio.wait_for(..., N)`.
"""

from __future__ import annotations

from corral.gates.frameworks.base import Decoration, Framework, Words
from corral.gates.frameworks.walk import Finder

APPS = frozenset({"procrastinate.App", "procrastinate.app.App"})


class Procrastinate(Framework):
    name = "procrastinate"
    words = Words(packages=(b"procrastinate",), declaring=(b"task",), methods=("task",))

    def owns_method(self, made: str, attribute: str) -> bool:
        return made in APPS and attribute == "task"

    def decorated(self, finder: Finder, site: Decoration) -> None:
        finder.body_only(self, site)


FRAMEWORK = Procrastinate()
