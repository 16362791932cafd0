"""RQ as a CRL2 framework: `@job(queue, timeout=...)` of `rq.decorators`, and django-rq's `@job` (bare or
called), which passes its arguments on to RQ's.

The timeout is `timeout=` / `job_timeout=` or the third positional argument, in seconds or as a duration
string (`"5m"`, `"1h"`). RQ's documented default (180 s) counts unless the job turns the limit off
(`timeout=-1`, zero or negative); strict mode demands an explicit timeout.
"""

from __future__ import annotations

import ast
import re

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Unresolved
from corral.gates.frameworks.base import Decoration, Framework, Limit, Words, has_double_star, keyword, string_argument
from corral.gates.frameworks.walk import Finder

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", re.IGNORECASE)
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class Rq(Framework):
    name = "rq"
    words = Words(packages=(b"rq", b"django_rq"), declaring=(b"job",))
    default_limit = 180.0
    no_limit_arguments = '("default", timeout=-1)'
    decorators = frozenset({"rq.decorators.job", "django_rq.job", "django_rq.decorators.job"})

    INVALID = (
        """
        from rq.decorators import job
        @job("low", timeout=-1)  # error: 2 CRL203 "rq: timeout=-1 (no limit)"
        def crawl(url): ...
        """,
        """
        from functools import partial
        from rq.decorators import job
        background = partial(job, "low", timeout=-1)
        @background  # error: 2 CRL203 "through partial(job, ...) at"
        def crawl(url): ...
        """,
    )

    def decorated(self, finder: Finder, site: Decoration) -> None:
        call = site.call
        found = None
        queue = string_argument(call, finder.values, site.scope) if call is not None else None
        if call is not None:
            own = keyword(call, "timeout") or keyword(call, "job_timeout")
            expression = own.value if own is not None else (call.args[2] if len(call.args) > 2 else None)
            if expression is not None:
                found = _timeout(finder, expression, site.scope)
            elif has_double_star(call):
                found = Limit(unresolved=finder.values.unresolved(call, "timeout may come from **kwargs"))
        finder.default_or_explicit(self, site.node, site.function, found, label="timeout", queue=queue)


def _timeout(finder: Finder, expression: ast.expr, scope: Scope) -> Limit | None:
    text = finder.values.string(expression, scope)
    if isinstance(text, str):
        match = _DURATION.fullmatch(text)
        if match:
            return Limit(seconds=float(match.group(1)) * _UNITS[match.group(2).lower()])
    value = finder.values.number(expression, scope)
    if isinstance(value, Unresolved):
        return Limit(unresolved=value)
    if value is None:
        return None  # RQ's default applies
    if value == -1:
        return Limit(off="timeout=-1 (no limit)")
    return finder.limit(expression, scope, "timeout")


FRAMEWORK = Rq()
