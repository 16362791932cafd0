"""Dramatiq as a CRL2 framework: `@dramatiq.actor(time_limit=...)`, in milliseconds.

Dramatiq's documented default (10 minutes) counts unless the actor turns the limit off (`time_limit=None`,
zero or negative); strict mode demands an explicit `time_limit`.
"""

from __future__ import annotations

from corral.gates.frameworks.base import (
    UNSET,
    Decoration,
    Framework,
    Limit,
    Words,
    has_double_star,
    keyword,
    string_keyword,
)
from corral.gates.frameworks.walk import Finder


class Dramatiq(Framework):
    name = "dramatiq"
    words = Words(packages=(b"dramatiq",), declaring=(b"actor",))
    default_limit = 600.0
    no_limit_arguments = "(time_limit=0)"
    decorators = frozenset({"dramatiq.actor", "dramatiq.actor.actor"})

    VALID = (
        """
        import dramatiq
        @dramatiq.actor
        def count_words(url): ...
        """,
    )

    def decorated(self, finder: Finder, site: Decoration) -> None:
        call = site.call
        found = None
        queue = None
        if call is not None:
            queue = string_keyword(call, "queue_name", finder.values, site.scope)
            own = keyword(call, "time_limit")
            if own is not None:
                found = finder.limit(own.value, site.scope, "time_limit")
                if found == UNSET:
                    found = Limit(off="time_limit=None is no limit")
            elif has_double_star(call):
                found = Limit(unresolved=finder.values.unresolved(call, "time_limit may come from **kwargs"))
        # Dramatiq's time_limit is in milliseconds.
        finder.default_or_explicit(self, site.node, site.function, found, label="time_limit", scale=0.001, queue=queue)


FRAMEWORK = Dramatiq()
