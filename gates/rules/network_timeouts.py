"""CRL210: inside a job kind's body, a network call must time out before the job does.

The calls and clients come from `corral.gates.knowledge.network` (shared with CRL4); the job kinds and their
timeouts from `corral.gates.frameworks`. A call judged here: its own `timeout=` if given, else its client's
(constructed in the job's function, at module level, at module level of another project module the client is
imported from (`from app.clients import http`, `clients.http.get(...)`), or, for a client held as
`self.<name>`, in the class: `self.http = httpx.Client(timeout=5)` in `__init__`), else the library's default.
A client built in the job is reported once, at its construction; one built at module level (of this module or
another) at each call the job makes through it, naming where it was built. A client known only by an
annotation (a parameter, a dataclass field `http: httpx.Client`) is not judged by its timeout, which the gate
cannot see; its calls' own `timeout=` still is. `requests`, `urllib`, `urllib3`, `socket`, `http.client` and
`smtplib` have none (the global socket default, unset by default); httpx defaults to 5 s; aiohttp to a total
of 300 s. An API named in `extend-network` (and a client one returns) has only its `timeout=` keyword: without
one, it has no timeout the gate can read. Django mail (`send_mail`, `EmailMessage(...).send()`,
`get_connection().send_messages`) runs under its connection's `timeout=`
(`connection=get_connection(timeout=5)`), else `EMAIL_TIMEOUT`, read from the module-level assignment in the
project's settings modules (none: Django's default, no timeout; settings that disagree, or a value or a
`connection=` the gate cannot read: CRL204). Without a timeout, or with one not shorter than the job's, it is
a finding; a timeout the gate cannot read is CRL204. A function several kinds run (enqueued or registered from
several sites) is judged once, against the shortest of their timeouts, and each finding names that kind.

A call inside `async with asyncio.timeout(N):` (or `async_timeout.timeout(N)`), or the awaitable
`asyncio.wait_for(call, N)` runs (awaited, or handed to `asyncio.run`), in the job or in a function on the way to
the call, is cancelled after N: its timeout is the shorter of its own and the smallest N of the scopes around it
(`None` bounds nothing; the arguments of `wait_for` run before it, outside); when the scope is the shorter and
still longer than the job's, the finding names it (`is bounded by asyncio.wait_for() at app/jobs.py:19 to
30 s`). `asyncio.timeout_at` cancels at a
deadline on the loop's clock, which the gate cannot read: a call that fails on its own inside one is CRL204, as
inside a scope whose delay cannot be read.

A function object handed to `map`/`filter` and iterated in the job's body, or to `sorted`/`min`/`max` as
`key=` (`list(map(requests.get, urls))`), is a call there, judged as one.

A call in the job's body that runs project functions (`corral.gates.analysis.project` says which: a method
called on `super()` included) is
judged by every network call they make, transitively, with cycles cut (`corral.gates.knowledge.network_reach`
walks them): each as if written there, read in the callee's module and scope, against this job's timeout.
The first that fails is reported at the call, naming the chain. A timeout that is a parameter of a
followed function is read at its call: the argument passed (through every hop), else the parameter's
default; a helper's own `**kwargs` passed on carries the call's `timeout=`. Through `functools.partial`
(`p = partial(post, url, timeout=5)`, `p()`) the partial's arguments come first, read where it is made, and a
keyword of the call replaces the partial's; `Cls(...)` (its `__init__`) and an instance's call (`__call__`) bind
`self`. A `**` spread that may pass the parameter is CRL204. A kind declared here for a
function of another module (arq's or SAQ's function lists, `CronJob(imported)`) has that body judged, reported
at the declaration. Not followed: what runs later or never (functions and lambdas defined but not called,
callables handed on, `if TYPE_CHECKING:`, a coroutine not awaited or run, a generator not iterated: see
`corral.gates.analysis.runs_now`), a Huey task called (that enqueues it; a Celery task, Dramatiq actor or
RQ `@job` function called directly runs here and is followed), calls through objects of unknown type,
clients not seen constructed.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from functools import cached_property
from typing import ClassVar, NamedTuple, TypeGuard

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.modules import ModuleInfo
from corral.gates.analysis.names import ModuleNames, Scope, is_type_checking_test, parameter_default
from corral.gates.analysis.project import Callee
from corral.gates.analysis.runs_now import applied_callables
from corral.gates.analysis.scoped import scoped_parts
from corral.gates.analysis.values import Located, StaticValues, Unresolved
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks import call_enqueues, enqueue_of, job_kinds
from corral.gates.frameworks.base import JobKind, keyword
from corral.gates.frameworks.walk import ASYNC_TIMEOUTS, WAIT_FOR
from corral.gates.knowledge.network import (
    CALLS,
    CLIENTS,
    CONFIGURED,
    DJANGO_MAIL,
    HeldElsewhere,
    NetworkCall,
    NetworkCalls,
)
from corral.gates.knowledge.network_reach import Hop, NetworkReach, called_in_place
from corral.gates.rules.base import Rule
from corral.gates.rules.job_timeouts import might_declare_jobs
from corral.gates.source.prefilter import Source

# Library defaults in seconds, for a call (or client) given no timeout; None: no timeout at all.
DEFAULTS: dict[str, float | None] = {"httpx": 5.0, "aiohttp": 300.0}
# A requests.Session has no timeout of its own: each call needs its own.
SESSIONS_WITHOUT_TIMEOUT = frozenset({"requests"})
# Django mail without a timeout of its own runs under this setting (Django's default: None, no timeout).
EMAIL_TIMEOUT = "EMAIL_TIMEOUT"
# Where a client constructor takes its timeout positionally (after the host/port), when it does.
_CLIENT_TIMEOUT_POSITION = {"http.client": 2, "smtplib": 3}
HTTPX_TIMEOUTS = frozenset({"httpx.Timeout", "httpx._config.Timeout"})
AIOHTTP_TIMEOUTS = frozenset({"aiohttp.ClientTimeout", "aiohttp.client.ClientTimeout"})
# Scopes that cancel what runs in them after a delay (`async with asyncio.timeout(N):`), or at a deadline on
# the event loop's clock, which the gate cannot read.
SCOPE_TIMEOUTS = ASYNC_TIMEOUTS | {"async_timeout.timeout"}
SCOPE_DEADLINES = frozenset({"asyncio.timeout_at", "asyncio.timeouts.timeout_at", "async_timeout.timeout_at"})


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
        """
        import requests
        from corral.runtime import Queue
        webhook = Queue("webhook", max_workers=8, timeout=15)
        def post(url, timeout=5):
            return requests.post(url, timeout=timeout)
        @webhook.job("webhook.deliver")
        def deliver(ctx, url):
            post(url)
            post(url, timeout=10)
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
        """
        import requests
        from corral.runtime import Queue
        webhook = Queue("webhook", max_workers=8, timeout=15)
        def post(url, timeout=None):
            return requests.post(url, timeout=timeout)
        @webhook.job("webhook.deliver")
        def deliver(ctx, url):
            post(url)  # error: 5 CRL210 "post() -> requests.post (app/module.py:5) without a timeout inside job"
            post(url, timeout=15)  # error: 5 CRL210 "post() -> requests.post (app/module.py:5) timeout 15 s"
        """,
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.values = StaticValues.of(context)
        self.calls = NetworkCalls(context.tree, context.names, context.config.extend_network)
        self.reported: set[int] = set()
        self._bounds: dict[ModuleInfo, dict[ast.Call, tuple[_Bound, ...]]] = {}

    @cached_property
    def reach(self) -> NetworkReach:
        """What the project functions called in a job's body reach (other modules read on demand)."""
        return NetworkReach.of_file(self.context, call_enqueues, enqueue_of)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        # A job file need not name a network API itself: a project function its jobs call may make the call.
        # Every file that may declare a job is read (JobTimeouts reads each of them anyway).
        return source.holds(might_declare_jobs)

    def check(self) -> Iterator[Finding]:
        for kind in _strictest_kinds(job_kinds(self.context)):
            if kind.function is None:
                yield from self._judge_defined_elsewhere(kind)
                continue
            scope = self.context.names.scope_of(kind.function)
            here = _Place(self.values, self.calls, scope, ())
            for written in _calls_in(kind.function, self.context.names, scope):
                # A function handed to `map` and iterated here, or a `key=`, is called here too.
                applied = applied_callables(written, scope, self.values.module)
                for call in (written, *(called_in_place(function) for function in applied)):
                    network = self.calls.classify(call, scope) or self.reach.held_call(call, scope, self.values.module)
                    if network is not None:
                        yield from self._judge_direct(kind, network, here)
                    else:
                        yield from self._judge_followed(kind, call, scope)

    def _judge_direct(self, kind: JobKind, network: NetworkCall, here: _Place) -> Iterator[Finding]:
        timeout = self._timeout(network, here)
        # A client is reported once, at its construction, however many of its calls fail.
        if timeout is None or (timeout.where is not network.call and id(timeout.where) in self.reported):
            return
        bounds = self._bounds_of(network.call, here._replace(path=()))
        where, label = timeout.where, timeout.label
        if timeout.module_level:
            # Built once for the whole module, it is the job's call that must not use it as it is.
            where = network.call
            label = (
                f"{network.api} (client {label} built at {self.context.relpath}:{getattr(timeout.where, 'lineno', 1)})"
            )
        finding = self._verdict(kind, timeout, label, where, bounds)
        if finding is not None:
            self.reported.add(id(where))
            yield finding

    def _judge_followed(self, kind: JobKind, call: ast.Call, scope: Scope) -> Iterator[Finding]:
        """A call of project functions judged as the network calls they make: reported at the call, naming
        the chain, for the first of them (in source order) that fails."""
        module = self.values.module
        for callee in self.reach.runs(call, scope, module):
            finding = self._first_failing(kind, callee, (Hop(call, scope, module, callee),), call)
            if finding is not None:
                yield finding
                return

    def _judge_defined_elsewhere(self, kind: JobKind) -> Iterator[Finding]:
        """A kind whose function another project module defines (arq's `functions = [download]`, SAQ's
        settings, `CronJob(imported)`): the network calls its body makes, reported at the declaration."""
        reference = _function_reference(kind.node)
        located = self.values.definition(reference) if reference is not None else None
        if not isinstance(located, Located) or not isinstance(located.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        callee = Callee(located.node, located.values.module, located.node.name)
        finding = self._first_failing(kind, callee, (), kind.node)
        if finding is not None:
            yield finding

    def _first_failing(self, kind: JobKind, callee: Callee, before: tuple[Hop, ...], where: ast.AST) -> Finding | None:
        """The finding, at `where`, of the first network call `callee` makes that fails in `kind`, reached
        through the calls `before` (whose arguments are its parameters)."""
        for use in self.reach.uses(callee):
            values = self.values.for_module(use.module)
            place = _Place(values, self.reach.network(use.module), use.scope, (*before, *use.path))
            timeout = self._timeout(use.network, place)
            if timeout is None:
                continue
            reached = use.reached(callee)._replace(api=timeout.label, line=getattr(timeout.where, "lineno", 1))
            # Each call on the way may run inside a timeout scope of the function it stands in.
            hops = (*before, *use.path)
            bounds = [
                *(
                    bound
                    for index, hop in enumerate(hops)
                    for bound in self._bounds_of(hop.call, self._at_hop(hop, hops[:index]))
                ),
                *self._bounds_of(use.network.call, place),
            ]
            finding = self._verdict(kind, timeout, reached.chain(), where, bounds)
            if finding is not None:
                return finding
        return None

    def _verdict(
        self, kind: JobKind, timeout: _Timeout, label: str, where: ast.AST, bounds: list[tuple[_Bound, _Place]]
    ) -> Finding | None:
        job = kind.timeout
        shortest, unreadable, bounding = self._shortest_bound(bounds)
        if shortest is not None and (job is None or shortest < job):
            return None  # cancelled by its timeout scope in time, whatever its own timeout
        seconds = timeout.seconds
        if isinstance(seconds, Unresolved):
            return self.context.finding(where, self.UNRESOLVED, f"{label} timeout {seconds}")
        failing = seconds is None or (job is not None and seconds >= job)
        if failing and unreadable is not None:
            # The scope it runs in might cancel it in time: say what cannot be read, not that it fails.
            return self.context.finding(where, self.UNRESOLVED, f"{label} runs inside a timeout scope: {unreadable}")
        if (
            shortest is not None
            and bounding is not None
            and job is not None
            and shortest > job
            and (seconds is None or shortest < seconds)
        ):
            # The timeout scope is the effective bound: name it, not the call's own (longer or absent) timeout.
            # One equal to the job's says no more than the job's does (a Procrastinate job's limit is its scope).
            own = "no timeout of its own" if seconds is None else f"its own timeout {_shown(seconds)} s"
            return self.context.finding(
                where,
                self.NO_TIMEOUT,
                f"{label} ({own}) is bounded by {bounding} to {_shown(shortest)} s, not shorter than the "
                f"{_shown(job)} s timeout of job {kind.name!r}",
            )
        if seconds is None:
            against = f" (job {kind.name!r} times out after {_shown(job)} s)" if job is not None else ""
            # Of an API named in extend-network the gate reads only a `timeout=`: it may have one it cannot see.
            without = "without a timeout the gate can read" if timeout.library == CONFIGURED else "without a timeout"
            return self.context.finding(where, self.NO_TIMEOUT, f"{label} {without} inside job {kind.name!r}{against}")
        if job is not None and seconds >= job:
            return self.context.finding(
                where,
                self.NO_TIMEOUT,
                f"{label} timeout {_shown(seconds)} s is not shorter than the {_shown(job)} s timeout "
                f"of job {kind.name!r}",
            )
        return None

    # -- timeout scopes: `async with asyncio.timeout(N):`, `await asyncio.wait_for(call, N)` ----------------

    def _bounds_of(self, call: ast.Call, place: _Place) -> list[tuple[_Bound, _Place]]:
        """The timeout scopes `call` runs in within its function, each with where its delay is read (`place`
        is where the call stands: its function's parameters are read through `place.path`)."""
        module = place.values.module
        known = self._bounds.get(module)
        if known is None:
            known = self._bounds[module] = _timeout_scopes(module.tree, module.names)
        return [(bound, place._replace(scope=bound.scope)) for bound in known.get(call, ())]

    def _at_hop(self, hop: Hop, before: tuple[Hop, ...]) -> _Place:
        """Where a call on the way to a network call stands, reached through the calls `before`."""
        return _Place(self.values.for_module(hop.module), self.reach.network(hop.module), hop.scope, before)

    def _shortest_bound(
        self, bounds: list[tuple[_Bound, _Place]]
    ) -> tuple[float | None, Unresolved | None, str | None]:
        """The shortest delay of the timeout scopes (None: none bounds the call), the first that cannot be read
        (a deadline, or a delay the gate cannot resolve), and the scope that sets the shortest as messages show
        it (`asyncio.wait_for() at app/jobs.py:19`)."""
        shortest: float | None = None
        unreadable: Unresolved | None = None
        bounding: str | None = None
        for bound, place in bounds:
            if bound.delay is None:
                seconds: float | Unresolved | None = place.values.unresolved(
                    bound.node, f"{ast.unparse(bound.node.func)}() sets a deadline the gate cannot read"
                )
            else:
                seconds = self._seconds(bound.delay, place)
            if isinstance(seconds, Unresolved):
                unreadable = unreadable or seconds
            elif seconds is not None and (shortest is None or seconds < shortest):
                where = f"{place.values.module.relpath}:{bound.node.lineno}"
                shortest, bounding = seconds, f"{ast.unparse(bound.node.func)}() at {where}"
        return shortest, unreadable, bounding

    def _timeout(self, network: NetworkCall, place: _Place) -> _Timeout | None:
        """The timeout `network` runs under, read at `place`: its own, else its client's, else its library's
        default. None for a client method whose client the gate does not know by construction."""
        where: ast.AST = network.call
        module_level = False
        expression = network.timeout
        label = network.api
        func = network.call.func
        at = place
        client_method = (
            network.api not in CALLS
            and network.api not in place.network.configured
            and network.library not in SESSIONS_WITHOUT_TIMEOUT
        )
        if network.held is not None:
            # A client another module builds: judged at each call through it, its arguments read there.
            label = network.shown
        if expression is None and client_method and isinstance(func, ast.Attribute):
            # A client's method without its own timeout runs under the client's.
            constructed = self._held_construction(network.held) or self._construction(func.value, place)
            if constructed is None:
                return None  # a client not known by construction: nothing to judge it by
            client, at = constructed
            if network.held is None:
                where, label = client, ast.unparse(client.func)
                module_level = at.scope is at.values.module.names.root and place.scope is not at.scope
            expression = _client_timeout(client, network.library)
        if network.library == DJANGO_MAIL and (expression is None or _is_none(expression)):
            made = where if isinstance(where, ast.Call) else network.call
            return self._mail_timeout(made, label, at)._replace(module_level=module_level)
        if expression is None and any(item.arg is None for item in network.call.keywords):
            forwarded = self._forwarded_timeout(network.call, place)
            if forwarded is None:
                reason = "it may come from **kwargs"
                return _Timeout(
                    where, label, place.values.unresolved(network.call, reason), module_level, network.library
                )
            if isinstance(forwarded, Unresolved):
                return _Timeout(where, label, forwarded, module_level, network.library)
            expression, at = forwarded
        if expression is None:
            return _Timeout(where, label, DEFAULTS.get(network.library), module_level, network.library)
        return _Timeout(where, label, self._seconds(expression, at), module_level, network.library)

    def _mail_timeout(self, made: ast.Call, label: str, place: _Place) -> _Timeout:
        """The timeout of Django mail sent by `made` (a mail function, an e-mail's construction or a mail
        connection's) without one of its own: its `connection=`'s `timeout=`, else `EMAIL_TIMEOUT`."""
        given = keyword(made, "connection")
        if given is not None and not _is_none(given.value):
            constructed = self._construction(given.value, place)
            if constructed is None:
                reason = f"connection={ast.unparse(given.value)} is no mail connection the gate knows by construction"
                return _Timeout(made, label, place.values.unresolved(given.value, reason), library=DJANGO_MAIL)
            connection, at = constructed
            timeout = keyword(connection, "timeout")
            if timeout is not None and not _is_none(timeout.value):
                shown = f"{label} (connection built at {at.values.where(connection)})"
                return _Timeout(made, shown, self._seconds(timeout.value, at), library=DJANGO_MAIL)
        seconds, source = self._email_timeout
        return _Timeout(made, f"{label} ({source})", seconds, library=DJANGO_MAIL)

    @cached_property
    def _email_timeout(self) -> tuple[float | Unresolved | None, str]:
        """Django's `EMAIL_TIMEOUT` (default None: no timeout), from the project's settings modules: a
        module-level assignment of it; settings modules that disagree, or a value that cannot be read, leave
        it unknown. With where it comes from, to show."""
        project = self.values.project
        found: dict[float | None, str] = {}
        for relpath in project.files_containing(EMAIL_TIMEOUT.encode()):
            module = project.file(relpath)
            if module is None or EMAIL_TIMEOUT not in module.bindings:
                continue
            values = self.values.for_module(module)
            setting = values.member(Located(module.tree, values), EMAIL_TIMEOUT, module.tree)
            if isinstance(setting, Unresolved):
                return setting, EMAIL_TIMEOUT
            root = _Place(values, self.reach.network(module), module.names.root, ())
            seconds = self._seconds(setting.node, root) if isinstance(setting.node, ast.expr) else None
            if isinstance(seconds, Unresolved) or not isinstance(setting.node, ast.expr):
                unread = seconds if isinstance(seconds, Unresolved) else values.unresolved(setting.node, "not a value")
                return unread, f"{EMAIL_TIMEOUT} at {values.where(setting.node)}"
            found.setdefault(seconds, values.where(setting.node))
        if len(found) > 1:
            settings = ", ".join(
                f"{_shown(seconds) if seconds is not None else None} at {at}" for seconds, at in found.items()
            )
            return Unresolved(
                f"settings modules set different values ({settings})", next(iter(found.values()))
            ), EMAIL_TIMEOUT
        if found:
            ((seconds, at),) = found.items()
            return seconds, f"{EMAIL_TIMEOUT} at {at}"
        return None, f"{EMAIL_TIMEOUT} unset"

    def _held_construction(self, held: HeldElsewhere | None) -> tuple[ast.Call, _Place] | None:
        """The call that built a module-level client of another module, read at that module's top level."""
        if held is None or held.construction is None:
            return None
        values = self.values.for_module(held.module)
        return held.construction, _Place(values, self.reach.network(held.module), held.module.names.root, ())

    def _construction(self, node: ast.expr, place: _Place) -> tuple[ast.Call, _Place] | None:
        """The call that built the client `node` names, and where its arguments are read."""
        if isinstance(node, ast.Call):
            return node, place
        if isinstance(node, ast.Attribute):
            # `self.http`: built by the class, its arguments read in the method that builds it.
            held = place.network.attribute_construction(node, place.scope)
            return None if held is None else (held[0], place._replace(scope=held[1], path=()))
        if isinstance(node, ast.Name):
            own = place.network.construction(node.id, place.scope)
            if own is not None:
                return own, place
            values = place.values
            located = values.definition(node, place.scope)
            if not isinstance(located, Unresolved) and located.values.module is values.module:
                found = located.node
                made = values.dotted(found.func) if isinstance(found, ast.Call) else None
                if isinstance(found, ast.Call) and (made in CLIENTS or made in place.network.configured):
                    # Built at module level: its arguments name module-level values, not the function's.
                    return found, place._replace(scope=values.module.names.root, path=())
        return None

    def _seconds(self, expression: ast.expr, place: _Place) -> float | Unresolved | None:
        """A timeout argument in seconds: a number, a (connect, read) pair (their sum), an httpx.Timeout
        (its longest phase) or an aiohttp.ClientTimeout (its total)."""
        passed = self._argument(expression, place)
        if passed is not None:
            return passed if isinstance(passed, Unresolved) else self._seconds(*passed)
        values, scope = place.values, place.scope
        held = _class_constant(expression, scope, values.module.names)
        if held is not None:
            # `self.webhook_timeout` with `webhook_timeout = 2` in the class body: read there.
            return self._seconds(held[0], place._replace(scope=held[1], path=()))
        if isinstance(expression, (ast.Name, ast.Attribute)):
            # A constant holding a pair or a timeout object (`EXTERNAL_TIMEOUT = (10, 30)`) reads as one.
            located = values.definition(expression, scope)
            if isinstance(located, Located) and _structured(located.node, located.values):
                constant = located.node
                module = located.values.module
                defined = _Place(located.values, self.reach.network(module), module.names.root, ())
                return self._seconds(constant, defined)
        if isinstance(expression, ast.Tuple):
            total = 0.0
            for element in expression.elts:
                part = self._seconds(element, place)
                if isinstance(part, Unresolved) or part is None:
                    return part
                total += part
            return total
        if isinstance(expression, ast.Call):
            called = values.dotted(expression.func, scope)
            if called in HTTPX_TIMEOUTS:
                given = [*expression.args[:1], *(item.value for item in expression.keywords)]
                longest: float | None = None
                for value in given:
                    phase = self._seconds(value, place)
                    if isinstance(phase, Unresolved) or phase is None:
                        return phase
                    longest = phase if longest is None else max(longest, phase)
                return longest
            if called in AIOHTTP_TIMEOUTS:
                given_total = keyword(expression, "total")
                limit = given_total.value if given_total is not None else next(iter(expression.args), None)
                return None if limit is None else self._seconds(limit, place)
        return values.number(expression, scope)

    # -- the parameters of a function followed from the job ------------------------------------------

    def _argument(self, expression: ast.expr, place: _Place) -> tuple[ast.expr, _Place] | Unresolved | None:
        """What a parameter of the function a job's call runs stands for there: the argument the call passes
        (read where the call stands), else the parameter's default; None when `expression` is no parameter."""
        if not isinstance(expression, ast.Name) or not place.path:
            return None
        hop = place.path[-1]
        function, module = hop.callee.function, hop.callee.module
        if place.scope.binder(expression.id) is not module.names.scope_of(function):
            return None
        name = expression.id
        arguments = function.args
        parameters = [*arguments.posonlyargs, *arguments.args]
        caller = self._caller(place)
        call = hop.call
        shown = f"{hop.callee.shown}()"
        if arguments.vararg is not None and arguments.vararg.arg == name:
            return caller.values.unresolved(call, f"{name} is the *{name} of {shown}")
        if arguments.kwarg is not None and arguments.kwarg.arg == name:
            return caller.values.unresolved(call, f"{name} is the **{name} of {shown}")
        if name not in {parameter.arg for parameter in parameters} | {item.arg for item in arguments.kwonlyargs}:
            return None  # a local variable of the function, read as one
        layers = self._layers(hop, caller)
        if name not in {parameter.arg for parameter in arguments.posonlyargs}:
            given = _keyword_passed(layers, name, f"{name} of {shown}")
            if given is not None:
                return given
        positions = [parameter.arg for parameter in parameters]
        if name in positions:
            # Called on `self`/`cls`, a method's first parameter is the instance or the class.
            index = positions.index(name) - (1 if self._binds_first(hop) else 0)
            # A partial's positional arguments come before those of the call.
            passed = [(argument, layer.place) for layer in reversed(layers) for argument in layer.args]
            leading = passed[: index + 1]
            if any(isinstance(argument, ast.Starred) for argument, _ in leading):
                return caller.values.unresolved(call, f"{name} of {shown} may come from *args")
            if 0 <= index < len(passed):
                return passed[index]
        if any(item.arg is None for layer in layers for item in layer.keywords):
            return caller.values.unresolved(call, f"{name} of {shown} may come from **kwargs")
        default = parameter_default(arguments, name)
        if default is None:
            return caller.values.unresolved(call, f"{name} of {shown} is not passed")
        # A default is evaluated where the function is defined, once.
        values = self.values.for_module(module)
        definer = module.names.scope_of(function).parent or module.names.root
        return default, _Place(values, self.reach.network(module), definer, ())

    def _forwarded_timeout(self, call: ast.Call, place: _Place) -> tuple[ast.expr | None, _Place] | Unresolved | None:
        """A network call passed its followed function's own `**kwargs`: the timeout the call site passes
        (None when it passes none); None when the call's `**` is anything else."""
        if not place.path:
            return None
        hop = place.path[-1]
        function = hop.callee.function
        kwarg = function.args.kwarg
        spread = [item.value for item in call.keywords if item.arg is None]
        own = hop.callee.module.names.scope_of(function)
        if kwarg is None or not all(
            isinstance(value, ast.Name) and value.id == kwarg.arg and place.scope.binder(value.id) is own
            for value in spread
        ):
            return None
        caller = self._caller(place)
        layers = self._layers(hop, caller)
        given = _keyword_passed(layers, "timeout", f"the timeout of {hop.callee.shown}()")
        if given is not None:
            return given
        if any(item.arg is None for layer in layers for item in layer.keywords):
            return caller.values.unresolved(hop.call, f"the timeout of {hop.callee.shown}() may come from **kwargs")
        return None, caller

    def _layers(self, hop: Hop, caller: _Place) -> list[_Passed]:
        """The arguments a call passes to the function it runs, outermost first: the call's own, then those
        of each partial it runs the function through (`p = functools.partial(post, url)`, `p(timeout=3)`),
        each read where it stands."""
        layers = [_Passed(hop.call, hop.call.args, hop.call.keywords, caller)]
        for site in reversed(hop.callee.partials):
            # Made in the calling function itself, a partial's arguments may be that function's parameters.
            here = site.module is hop.module and site.scope is hop.scope
            values = self.values.for_module(site.module)
            at = _Place(values, self.reach.network(site.module), site.scope, caller.path if here else ())
            layers.append(_Passed(site.call, site.call.args[1:], site.call.keywords, at))
        return layers

    def _caller(self, place: _Place) -> _Place:
        """Where the last call of `place`'s path stands."""
        hop = place.path[-1]
        return _Place(self.values.for_module(hop.module), self.reach.network(hop.module), hop.scope, place.path[:-1])

    def _binds_first(self, hop: Hop) -> bool:
        """Whether the call passes the method's first parameter itself: a method called on an instance or
        a class method (not a function called through its class by name)."""
        callee = hop.callee
        names = callee.module.names
        body = names.scope_of(callee.function).parent
        owner = next(
            (node for node, scope in names.scopes.items() if scope is body and isinstance(node, ast.ClassDef)), None
        )
        if owner is None:
            return False
        decorators = {item.id for item in callee.function.decorator_list if isinstance(item, ast.Name)}
        if "staticmethod" in decorators:
            return False
        # Through a partial, the function wrapped decides (`partial(self.send, ...)`, `partial(Mailer.send, m)`).
        func = hop.callee.partials[0].call.args[0] if hop.callee.partials else hop.call.func
        through_class = (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == owner.name
        )
        return "classmethod" in decorators or not through_class


class _Place(NamedTuple):
    """Where an expression is read: its module's evaluator and network calls, its scope, and the calls that
    led there from the job's body (the last one's arguments are the parameters of the function it runs)."""

    values: StaticValues
    network: NetworkCalls
    scope: Scope
    path: tuple[Hop, ...]


class _Bound(NamedTuple):
    """A timeout scope a call runs in: the `asyncio.timeout(...)` / `wait_for(...)` call, its delay (None: a
    deadline, `timeout_at`), and the scope the delay is read in."""

    node: ast.Call
    delay: ast.expr | None
    scope: Scope


def _timeout_scopes(tree: ast.Module, names: ModuleNames) -> dict[ast.Call, tuple[_Bound, ...]]:
    """Every call of the module that runs inside timeout scopes of its own function, outermost first: the
    body of `async with asyncio.timeout(N):` (or `async_timeout.timeout`, `timeout_at`), and the awaitable
    `asyncio.wait_for(call, N)` runs (not its arguments, which run before). A function or lambda defined
    inside runs later: its body starts outside every scope."""
    found: dict[ast.Call, tuple[_Bound, ...]] = {}
    awaited: dict[ast.Call, _Bound] = {}
    pending: list[tuple[ast.AST, Scope, tuple[_Bound, ...]]] = [(tree, names.root, ())]
    while pending:
        node, scope, bounds = pending.pop()
        if isinstance(node, ast.Call):
            own = (*bounds, awaited[node]) if node in awaited else bounds
            if own:
                found[node] = own
            if names.resolve(node.func, scope) in WAIT_FOR and node.args and isinstance(node.args[0], ast.Call):
                given = node.args[1] if len(node.args) > 1 else getattr(keyword(node, "timeout"), "value", None)
                if given is not None:
                    awaited[node.args[0]] = _Bound(node, given, scope)
        if isinstance(node, ast.AsyncWith):
            inner = bounds
            for item in node.items:
                pending.append((item, scope, bounds))
                inner = (*inner, *_scope_bound(item.context_expr, scope, names))
            pending.extend((statement, scope, inner) for statement in node.body)
            continue
        parts = scoped_parts(node, scope, names)
        if parts is None:
            pending.extend((child, scope, bounds) for child in ast.iter_child_nodes(node))
            continue
        runs_later = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        pending.extend((part, inner, () if runs_later and inner is not scope else bounds) for part, inner in parts)
    return found


def _scope_bound(context: ast.expr, scope: Scope, names: ModuleNames) -> tuple[_Bound, ...]:
    if not isinstance(context, ast.Call):
        return ()
    called = names.resolve(context.func, scope)
    if called in SCOPE_DEADLINES:
        return (_Bound(context, None, scope),)
    if called not in SCOPE_TIMEOUTS:
        return ()
    delay = context.args[0] if context.args else getattr(keyword(context, "delay"), "value", None)
    return () if delay is None else (_Bound(context, delay, scope),)


class _Passed(NamedTuple):
    """The arguments one call, or one partial on its way, passes to the function, and where they are read."""

    call: ast.Call
    args: list[ast.expr]
    keywords: list[ast.keyword]
    place: _Place


class _Timeout(NamedTuple):
    """The timeout a network call runs under: where it is set (the call, or its client's construction), the
    API or client shown, its seconds (None: no timeout), and whether the client is one built at module level."""

    where: ast.AST
    label: str
    seconds: float | Unresolved | None
    module_level: bool = False
    library: str = ""


def _strictest_kinds(kinds: list[JobKind]) -> list[JobKind]:
    """One kind per function judged: a function several kinds run (enqueued or registered from several sites)
    is judged once, against the shortest of their timeouts (a call that fits it fits every other), so each
    offending call is reported once, naming that kind. Kinds judged at their declaration stay apart."""
    strictest: dict[ast.AST, JobKind] = {}
    for kind in kinds:
        key = kind.function if kind.function is not None else kind.node
        known = strictest.get(key)
        if known is None or _limit(kind) < _limit(known):
            strictest[key] = kind
    return list(strictest.values())


def _limit(kind: JobKind) -> float:
    return math.inf if kind.timeout is None else kind.timeout


def _function_reference(declaration: ast.expr) -> ast.expr | None:
    """The expression naming a kind's function in its declaration: the first argument of a call
    (`func(download, timeout=30)`, `CronJob(sweep, ...)`), the function of an `("alias", function)` pair, or
    the declaration itself (`functions = [download]`)."""
    if isinstance(declaration, ast.Call):
        return declaration.args[0] if declaration.args else None
    if isinstance(declaration, ast.Tuple):
        return declaration.elts[-1] if declaration.elts else None
    return declaration if isinstance(declaration, (ast.Name, ast.Attribute)) else None


def _structured(node: ast.AST, values: StaticValues) -> TypeGuard[ast.Tuple | ast.Call]:
    """Whether a constant's value is a (connect, read) pair or an httpx/aiohttp timeout object."""
    if isinstance(node, ast.Tuple):
        return True
    return isinstance(node, ast.Call) and values.dotted(node.func) in HTTPX_TIMEOUTS | AIOHTTP_TIMEOUTS


def _keyword_passed(layers: list[_Passed], name: str, shown: str) -> tuple[ast.expr, _Place] | Unresolved | None:
    """The argument passed as keyword `name`: the outermost layer naming it wins (a call's keyword replaces a
    partial's), unless a `**` spread before it may pass it too. None when no layer names it."""
    spread: _Passed | None = None
    for layer in layers:
        for item in layer.keywords:
            if item.arg == name:
                if spread is not None:
                    return spread.place.values.unresolved(spread.call, f"{shown} may come from **kwargs")
                return item.value, layer.place
        if spread is None and any(item.arg is None for item in layer.keywords):
            spread = layer
    return None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _class_constant(expression: ast.expr, scope: Scope, names: ModuleNames) -> tuple[ast.expr, Scope] | None:
    """The value `self.<name>` (or `cls.<name>`) reads in a method when the class body assigns `<name>` once
    and no method assigns it on the instance: the class attribute, and the class body's scope."""
    if not isinstance(expression, ast.Attribute):
        return None
    cls = names.instance_class(expression.value, scope)
    if cls is None or expression.attr in names.instance_attributes(cls):
        return None
    sites = cls.sites_of(expression.attr)
    if len(sites) != 1:
        return None
    site = sites[0]
    if isinstance(site, ast.Assign) and len(site.targets) == 1 and isinstance(site.targets[0], ast.Name):
        return site.value, cls
    if isinstance(site, ast.AnnAssign) and site.value is not None and isinstance(site.target, ast.Name):
        return site.value, cls
    return None


def _client_timeout(client: ast.Call, library: str) -> ast.expr | None:
    found = keyword(client, "timeout")
    if found is not None:
        return found.value
    position = _CLIENT_TIMEOUT_POSITION.get(library)
    if position is not None and len(client.args) > position:
        return client.args[position]
    return None


def _nodes_in(function: ast.FunctionDef | ast.AsyncFunctionDef, names: ModuleNames, scope: Scope) -> Iterator[ast.AST]:
    """The nodes of the function's own body as it runs: nested functions, classes and lambdas run elsewhere,
    an `if TYPE_CHECKING:` body never."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If) and is_type_checking_test(node.test, names, scope):
            pending.extend(node.orelse)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _calls_in(function: ast.FunctionDef | ast.AsyncFunctionDef, names: ModuleNames, scope: Scope) -> list[ast.Call]:
    return sorted(
        (node for node in _nodes_in(function, names, scope) if isinstance(node, ast.Call)),
        key=lambda call: (call.lineno, call.col_offset),
    )


def _shown(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if value == int(value) else str(value)
