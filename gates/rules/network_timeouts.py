"""CRL210: inside a job kind's body, a network call must time out before the job does.

The calls and clients come from `corral.gates.knowledge.network` (shared with CRL4); the job kinds and their
timeouts from `corral.gates.frameworks`. A call judged here: its own `timeout=` if given, else its client's
(constructed in the job's function, at module level, or, for a client held as `self.<name>`, in the
class: `self.http = httpx.Client(timeout=5)` in `__init__`), else the library's default. A client known
only by an annotation (a parameter, a dataclass field `http: httpx.Client`) is not judged by its timeout,
which the gate cannot see; its calls' own `timeout=` still is. `requests`,
`urllib`, `urllib3`, `socket`, `http.client` and `smtplib` have none (the global socket default, unset
by default); httpx defaults to 5 s; aiohttp to a total of 300 s. Without a timeout, or with one not
shorter than the job's, it is a finding; a timeout the gate cannot read is CRL204.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import StaticValues, Unresolved
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks import job_kinds
from corral.gates.frameworks.base import JobKind, keyword
from corral.gates.knowledge.network import CALLS, CLIENTS, NetworkCall, NetworkCalls, might_call_network
from corral.gates.rules.base import Rule
from corral.gates.rules.job_timeouts import might_declare_jobs
from corral.gates.source.prefilter import Source

# Library defaults in seconds, for a call (or client) given no timeout; None: no timeout at all.
DEFAULTS: dict[str, float | None] = {"httpx": 5.0, "aiohttp": 300.0}
# A requests.Session has no timeout of its own: each call needs its own.
SESSIONS_WITHOUT_TIMEOUT = frozenset({"requests"})
# Where a client constructor takes its timeout positionally (after the host/port), when it does.
_CLIENT_TIMEOUT_POSITION = {"http.client": 2, "smtplib": 3}
HTTPX_TIMEOUTS = frozenset({"httpx.Timeout", "httpx._config.Timeout"})
AIOHTTP_TIMEOUTS = frozenset({"aiohttp.ClientTimeout", "aiohttp.client.ClientTimeout"})


class NetworkTimeouts(Rule):
    NO_TIMEOUT: ClassVar[str] = "CRL210"
    # Shared with `JobTimeouts`, with the same summary: a timeout the gate cannot read.
    UNRESOLVED: ClassVar[str] = "CRL204"
    codes: ClassVar[dict[str, str]] = {
        NO_TIMEOUT: "a network call inside a job without a timeout shorter than the job's",
        UNRESOLVED: "a job or network timeout the gate cannot resolve statically",
    }

    VALID = (
        """
        import requests
        from corral.runtime import Queue
        webhook = Queue("webhook", max_workers=8, timeout=15)
        @webhook.job("webhook.deliver")
        def deliver(ctx, url):
            requests.post(url, timeout=10)
        """,
    )
    INVALID = (
        """
        import requests
        from corral.runtime import Queue
        webhook = Queue("webhook", max_workers=8, timeout=15)
        @webhook.job("webhook.deliver")
        def deliver(ctx, url):
            requests.post(url, timeout=20)  # error: 5 CRL210 "requests.post timeout 20 s is not shorter"
            requests.get(url)  # error: 5 CRL210 "requests.get without a timeout inside job 'webhook.deliver'"
        """,
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.values = StaticValues.of(context)
        self.calls = NetworkCalls(context.tree, context.names)
        self.reported: set[int] = set()

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        return source.holds(might_declare_jobs) and source.holds(might_call_network)

    def check(self) -> Iterator[Finding]:
        for kind in job_kinds(self.context):
            if kind.function is None:
                continue
            scope = self.context.names.scope_of(kind.function)
            for call in _calls_in(kind.function):
                network = self.calls.classify(call, scope)
                if network is not None:
                    yield from self._judge(kind, network, scope)

    def _judge(self, kind: JobKind, network: NetworkCall, scope: Scope) -> Iterator[Finding]:
        where: ast.AST = network.call
        expression = network.timeout
        label = network.api
        default = DEFAULTS.get(network.library)
        func = network.call.func
        client_method = network.api not in CALLS and network.library not in SESSIONS_WITHOUT_TIMEOUT
        if expression is None and client_method and isinstance(func, ast.Attribute):
            # A client's method without its own timeout runs under the client's.
            constructed = self._construction(func.value, scope)
            if constructed is None:
                return  # a client not known by construction: nothing to judge it by
            client, scope = constructed  # its timeout is read where it is constructed
            if id(client) in self.reported:
                return
            where, label = client, ast.unparse(client.func)
            expression = _client_timeout(client, network.library)
        if expression is None and any(item.arg is None for item in network.call.keywords):
            seconds: float | Unresolved | None = self.values.unresolved(network.call, "it may come from **kwargs")
        elif expression is None:
            seconds = default
        else:
            seconds = self._seconds(expression, scope)
        if isinstance(seconds, Unresolved):
            self.reported.add(id(where))
            yield self.context.finding(where, self.UNRESOLVED, f"{label} timeout {seconds}")
            return
        job = kind.timeout
        if seconds is None:
            self.reported.add(id(where))
            against = f" (job {kind.name!r} times out after {_shown(job)} s)" if job is not None else ""
            message = f"{label} without a timeout inside job {kind.name!r}{against}"
            yield self.context.finding(where, self.NO_TIMEOUT, message)
        elif job is not None and seconds >= job:
            self.reported.add(id(where))
            yield self.context.finding(
                where,
                self.NO_TIMEOUT,
                f"{label} timeout {_shown(seconds)} s is not shorter than the {_shown(job)} s timeout "
                f"of job {kind.name!r}",
            )

    def _construction(self, node: ast.expr, scope: Scope) -> tuple[ast.Call, Scope] | None:
        """The call constructing the client `node` is, and the scope it is read in."""
        if isinstance(node, ast.Call):
            return node, scope
        if isinstance(node, ast.Attribute):
            return self.calls.attribute_construction(node, scope)
        if isinstance(node, ast.Name):
            own = self.calls.construction(node.id, scope)
            if own is not None:
                return own, scope
            located = self.values.definition(node, scope)
            if not isinstance(located, Unresolved) and located.values is self.values:
                found = located.node
                if isinstance(found, ast.Call) and self.values.dotted(found.func) in CLIENTS:
                    return found, scope
        return None

    def _seconds(self, expression: ast.expr, scope: Scope) -> float | Unresolved | None:
        """A timeout argument in seconds: a number, a (connect, read) pair (their sum), an httpx.Timeout
        (its longest phase) or an aiohttp.ClientTimeout (its total)."""
        if isinstance(expression, ast.Tuple):
            total = 0.0
            for element in expression.elts:
                part = self.values.number(element, scope)
                if isinstance(part, Unresolved) or part is None:
                    return part
                total += part
            return total
        if isinstance(expression, ast.Call):
            called = self.values.dotted(expression.func, scope)
            if called in HTTPX_TIMEOUTS:
                given = [*expression.args[:1], *(item.value for item in expression.keywords)]
                longest: float | None = None
                for value in given:
                    phase = self.values.number(value, scope)
                    if isinstance(phase, Unresolved) or phase is None:
                        return phase
                    longest = phase if longest is None else max(longest, phase)
                return longest
            if called in AIOHTTP_TIMEOUTS:
                given_total = keyword(expression, "total")
                limit = given_total.value if given_total is not None else next(iter(expression.args), None)
                return None if limit is None else self.values.number(limit, scope)
        return self.values.number(expression, scope)


def _client_timeout(client: ast.Call, library: str) -> ast.expr | None:
    found = keyword(client, "timeout")
    if found is not None:
        return found.value
    position = _CLIENT_TIMEOUT_POSITION.get(library)
    if position is not None and len(client.args) > position:
        return client.args[position]
    return None


def _nodes_in(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of the function's own body: nested functions, classes and lambdas run elsewhere."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _calls_in(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    return sorted(
        (node for node in _nodes_in(function) if isinstance(node, ast.Call)),
        key=lambda call: (call.lineno, call.col_offset),
    )


def _shown(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if value == int(value) else str(value)
