"""SAQ as a CRL2 framework: the `"functions"` of a settings dict, and `CronJob(function, timeout=...)`.

SAQ sets a job's timeout where it is enqueued, so a declared function can only rely on SAQ's documented
default (10 s); a `CronJob` may give its own (zero or negative turns it off). Strict mode demands an
explicit timeout.
"""

from __future__ import annotations

import ast

from corral.gates.analysis.names import Scope
from corral.gates.frameworks.base import UNRESOLVED, UNSET, Framework, Words, keyword
from corral.gates.frameworks.walk import Finder


class Saq(Framework):
    name = "saq"
    words = Words(packages=(b"saq",), always_read=True)
    default_limit = 10.0
    calls = frozenset({"saq.CronJob", "saq.job.CronJob"})

    def called(self, finder: Finder, call: ast.Call, scope: Scope) -> None:
        """`CronJob(function, timeout=...)`."""
        finder.seen_calls.add(id(call))
        own = keyword(call, "timeout")
        found = finder.limit(own.value, scope, "timeout") if own is not None else None
        function = finder.function(call.args[0], scope) if call.args else None
        finder.default_or_explicit(self, call, function, None if found == UNSET else found, label="timeout")

    def mapping(self, finder: Finder, node: ast.Dict, scope: Scope) -> None:
        """`{"functions": [...], ...}`, the settings a SAQ worker is started with, in a module that imports saq."""
        if not finder.imports("saq"):
            return
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "functions":
                self._functions(finder, value, scope)

    def _functions(self, finder: Finder, functions: ast.expr, scope: Scope) -> None:
        if not isinstance(functions, (ast.List, ast.Tuple)):
            finder.fail(self, functions, None, UNRESOLVED, "the SAQ functions setting is not a literal list")
            return
        for element in functions.elts:
            target = element.elts[1] if isinstance(element, ast.Tuple) and len(element.elts) == 2 else element
            # SAQ sets a job's timeout where it is enqueued; the declaration can only rely on the default.
            finder.default_or_explicit(self, element, finder.function(target, scope), None, label="timeout")


FRAMEWORK = Saq()
