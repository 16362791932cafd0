"""Huey as a CRL2 framework: `@huey.task()` and its periodic and db variants, on a Huey instance or from
`huey.contrib.djhuey`.

Huey has no hard timeout: the body must run inside `asyncio.timeout(N)` / `asyncio.wait_for(..., N)`.
"""

from __future__ import annotations

from corral.gates.frameworks.base import Decoration, Framework, Words
from corral.gates.frameworks.walk import Finder

METHODS = ("task", "periodic_task", "db_task", "db_periodic_task")


class Huey(Framework):
    name = "huey"
    words = Words(packages=(b"huey",), declaring=(b"task",), methods=METHODS)
    decorators = frozenset(f"huey.contrib.djhuey.{method}" for method in METHODS)

    def owns_method(self, made: str, attribute: str) -> bool:
        return made.split(".")[0] == "huey" and attribute in METHODS

    def decorated(self, finder: Finder, site: Decoration) -> None:
        finder.body_only(self, site)


FRAMEWORK = Huey()
