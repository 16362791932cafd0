"""Which network calls running a project function makes now, and through which chains of calls.

`NetworkReach.uses(callee)` walks the function's body as it runs when called: the network calls `network.py`
classifies (`classify`: with those made through a module-level client of another project module, `held_call`,
which reads that module only when the method is a client's network method), and the project functions it calls
(`analysis/project.py` says which), followed transitively with cycles cut. What runs later is not walked:
functions and lambdas defined in the body but not called there, callables handed on
(`transaction.on_commit(send)`, `functools.partial(...)`), code behind `if TYPE_CHECKING:`, a coroutine or
generator a call makes but does not run (`analysis/runs_now.py`), and a project function whose call enqueues a
job instead (a Huey task: `runs` asks the `enqueues` the rules pass in, since the frameworks sit above this
layer). The answer is every network call found, in source order, each with the calls that lead to it (and
where they stand, so a rule can read the arguments they pass); `of(callee)` is the first of them, as a chain
to show. Both CRL401 (any network call inside a transaction) and CRL210 (each network call's timeout inside a
job) read this one walk.

The same walk collects the jobs the body enqueues (`enqueued(callee)`, for CRL402): the calls the rules'
`enqueue_of` recognises (the frameworks know them: `send_receipt.delay()`, `queue.enqueue(fn)`, a Huey
task's call), each as a `JobEnqueue`, the first one as a chain.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from corral.gates.analysis.modules import MAX_REEXPORTS, Dependency, ModuleInfo, ProjectModules, run_memo
from corral.gates.analysis.names import Scope, lookup_in
from corral.gates.analysis.project import Callee, Function, ProjectFunctions, may_bind_value
from corral.gates.analysis.runs_now import applied_callables
from corral.gates.analysis.scoped import ScopedVisitor
from corral.gates.analysis.values import StaticValues
from corral.gates.knowledge.network import (
    CLIENT_METHODS,
    ClientKind,
    HeldElsewhere,
    NetworkCall,
    NetworkCalls,
    client_method_call,
)

if TYPE_CHECKING:
    from corral.gates.analysis.context import FileContext

# Whether calling a project function (of a module) enqueues a job rather than running the body.
Enqueues = Callable[[Function, ModuleInfo, ProjectModules], bool]


class JobEnqueue(NamedTuple):
    """A call that hands a job to a queue, as a framework recognises it: the API as messages show it
    (`send_receipt.delay`), the call, the framework's own way to enqueue on commit (`send_receipt.delay_on_commit`,
    Django only) or inside the transaction (`enqueue(..., conn=...)`), and whether the job is written through
    Django's own connection (so inside a Django transaction it is part of that transaction), and whether the
    framework hands it to Django's `on_commit` without `using=` (Celery's `delay_on_commit()`: it waits for the
    default database's commit only)."""

    api: str
    call: ast.Call
    on_commit: str | None = None
    in_transaction: str | None = None
    through_django: bool = False
    after_default_commit: bool = False


# The job a call (in a scope of a module) enqueues, as the frameworks recognise it, or None.
EnqueueOf = Callable[[ast.Call, Scope, ModuleInfo, ProjectFunctions], JobEnqueue | None]

# The uses kept per function: the first ones in source order. What a chain of helpers calling helpers can
# reach grows with every path through them; past this many, the later ones are not followed.
MAX_USES = 32


class Reached(NamedTuple):
    """A network call a function makes when it runs: the functions called on the way (the first is the
    function asked about), the API, and where the call stands."""

    hops: tuple[str, ...]
    api: str
    relpath: str
    line: int

    def chain(self, max_hops: int = 3) -> str:
        """`notify() -> post_json() -> requests.post (app/partners.py:31)`, long chains cut with `...`."""
        shown = [f"{hop}()" for hop in self.hops[:max_hops]]
        if len(self.hops) > max_hops:
            shown.append("...")
        return " -> ".join([*shown, f"{self.api} ({self.relpath}:{self.line})"])


class Hop(NamedTuple):
    """A call on the way to a network call: the call, the scope and module it stands in, the function it runs."""

    call: ast.Call
    scope: Scope
    module: ModuleInfo
    callee: Callee


class JobUse(NamedTuple):
    """One job a function enqueues when it runs: the calls on the way inside that function, the enqueue,
    and the module it stands in."""

    path: tuple[Hop, ...]
    enqueue: JobEnqueue
    module: ModuleInfo

    def reached(self, callee: Callee) -> Reached:
        hops = (callee.shown, *(hop.callee.shown for hop in self.path))
        return Reached(hops, self.enqueue.api, self.module.relpath, self.enqueue.call.lineno)


class NetworkUse(NamedTuple):
    """One network call a function makes when it runs: the calls on the way inside that function (outermost
    first; empty when the function makes it itself), the call, and the scope and module it stands in."""

    path: tuple[Hop, ...]
    network: NetworkCall
    scope: Scope
    module: ModuleInfo

    def reached(self, callee: Callee) -> Reached:
        """The use as a chain from `callee`, the function it was asked about."""
        hops = (callee.shown, *(hop.callee.shown for hop in self.path))
        return Reached(hops, self.network.shown, self.module.relpath, self.network.call.lineno)


class NetworkReach:
    """What project functions reach, seen from one checked file. Each function is walked once per run in
    this process, whichever file reaches it first: its answer, and the files the walk read, serve every
    file that reaches it after."""

    def __init__(
        self, functions: ProjectFunctions, enqueues: Enqueues, enqueue_of: EnqueueOf, configured: tuple[str, ...] = ()
    ) -> None:
        self.functions = functions
        self.enqueues = enqueues
        self.enqueue_of = enqueue_of
        # The `extend-network` APIs; the memos are kept per setting (one process may check with several).
        self.configured = configured
        setting = f" {configured}" if configured else ""
        # Each function's uses and the files its walk read, for every file of the run in this process.
        self._known: dict[Function, tuple[_Uses, dict[str, Dependency]]] = run_memo(f"network reach{setting}")
        # A function walked while a cycle through it was open: what it reaches short of the functions cut,
        # which stays exact while they are still being walked (and saves walking it again per path).
        self._partial: dict[Function, tuple[_Uses, frozenset[Function]]] = {}
        self._walking: set[Function] = set()
        self._networks: dict[ModuleInfo, NetworkCalls] = run_memo(f"network calls{setting}")

    @classmethod
    def of_file(cls, context: FileContext, enqueues: Enqueues, enqueue_of: EnqueueOf) -> NetworkReach:
        """The walk seen from a checked file, one per file: its rules share what the other walked. `enqueues`
        says which project functions a call enqueues as a job instead of running, `enqueue_of` which calls
        enqueue a job (the frameworks know)."""
        known = _BY_CONTEXT.get(context)
        if known is None:
            functions = ProjectFunctions(StaticValues.of(context).project)
            known = _BY_CONTEXT[context] = cls(functions, enqueues, enqueue_of, context.config.extend_network)
        return known

    def runs(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> list[Callee]:
        """The project function bodies `call`, met in `scope` of `module`, runs there: `ProjectFunctions.callees`
        less the job kinds the call enqueues (a Huey task)."""
        project = self.functions.project
        return [
            callee
            for callee in self.functions.callees(call, scope, module)
            if not self.enqueues(callee.function, callee.module, project)
        ]

    def of(self, callee: Callee) -> Reached | None:
        """The first network call `callee` makes when it runs, as a chain, or None."""
        uses = self.uses(callee)
        return uses[0].reached(callee) if uses else None

    def uses(self, callee: Callee) -> list[NetworkUse]:
        """Every network call `callee` makes when it runs, in source order (at most `MAX_USES`)."""
        return self.walk(callee)[0].network

    def enqueued(self, callee: Callee) -> list[JobUse]:
        """Every job `callee` enqueues when it runs, in source order (at most `MAX_USES`)."""
        return self.walk(callee)[0].jobs

    def network(self, module: ModuleInfo) -> NetworkCalls:
        known = self._networks.get(module)
        if known is None:
            known = self._networks[module] = NetworkCalls(module.tree, module.names, self.configured)
        return known

    def classify(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> NetworkCall | None:
        """The network call `call` is, met in `scope` of `module`: one `module` itself can tell, else one made
        through a module-level client of another project module (`held_call`)."""
        found = self.network(module).classify(call, scope)
        return found if found is not None else self.held_call(call, scope, module)

    def held_call(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> NetworkCall | None:
        """`sess.post(url)` with `from app.clients import sess` (or `clients.sess.post(url)`), where that module
        binds `sess` to a client at module level: the client's network call. Only a method some client makes
        network calls with sends the gate to the receiver's module, read only when its bytes may bind the name."""
        func = call.func
        if not isinstance(func, ast.Attribute) or (func.attr not in CLIENT_METHODS and not self.configured):
            return None
        dotted = module.names.resolve(func.value, scope)
        held = self._held_client(dotted) if dotted is not None else None
        return None if held is None else client_method_call(call, *held)

    def _held_client(self, dotted: str, depth: int = 0) -> tuple[list[ClientKind], HeldElsewhere] | None:
        """The kinds of client the project module-level name `dotted` is bound to (through re-exports), and
        where; None when it is no client, or no project module binds it."""
        owner, _, name = dotted.rpartition(".")
        project = self.functions.project
        data = project.source(owner) if owner else None
        if data is None or not may_bind_value(data, name):
            return None
        module = project.module(owner)
        if module is None:
            return None
        root = module.names.root
        target = root.lookup(name)
        if target is not None:
            # Re-exported (`from app.clients import sess` in `app/__init__.py`): the module it comes from binds it.
            return self._held_client(target, depth + 1) if depth < MAX_REEXPORTS else None
        network = self.network(module)
        kinds = lookup_in(network.clients, name, root)
        if not kinds:
            return None
        return kinds, HeldElsewhere(dotted, module, network.construction(name, root))

    def walk(self, callee: Callee) -> tuple[_Uses, set[Function]]:
        """What `callee` reaches, and the functions whose walk was cut short because they were being walked
        already (a cycle): an answer that depended on a cut is kept only once the cycle's head is done."""
        function = callee.function
        project = self.functions.project
        known = self._known.get(function)
        if known is not None:
            uses, read = known
            # Reusing an answer walked for another file: this file depends on what that walk read.
            project.replay(read)
            return uses, set()
        if function in self._walking:
            return _Uses([], []), {function}
        partial = self._partial.get(function)
        if partial is not None and partial[1] <= self._walking:
            return partial[0], set(partial[1])
        self._walking.add(function)
        try:
            with project.recording() as read:
                body = _Body(self, callee.module)
                uses = body.collect(function)
        finally:
            self._walking.discard(function)
        body.cut.discard(function)
        if body.cut:
            self._partial[function] = uses, frozenset(body.cut)
        else:
            self._known[function] = (uses, read)
            self._partial.pop(function, None)
        return uses, body.cut


_BY_CONTEXT: weakref.WeakKeyDictionary[FileContext, NetworkReach] = weakref.WeakKeyDictionary()


class _Uses(NamedTuple):
    """What a function's walk found: its network calls and the jobs it enqueues."""

    network: list[NetworkUse]
    jobs: list[JobUse]


class _Body(ScopedVisitor):
    """One function body as it runs when called, collecting the network calls and enqueues it reaches."""

    def __init__(self, reach: NetworkReach, module: ModuleInfo) -> None:
        super().__init__(module.names)
        self.reach = reach
        self.module = module
        self.uses = _Uses([], [])
        self.cut: set[Function] = set()

    def collect(self, function: Function) -> _Uses:
        self._visit_in_scope(self.names.scope_of(function), function.body)
        return self.uses

    def visit(self, node: ast.AST) -> None:
        if len(self.uses.network) < MAX_USES or len(self.uses.jobs) < MAX_USES:
            super().visit(node)

    # Defined here, run later (or never): not part of this call.
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        return

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_Call(self, node: ast.Call) -> None:
        network, jobs = self.uses
        # An enqueue is the job's, not a network call (a broker client named in extend-network, say).
        enqueue = self.reach.enqueue_of(node, self.scope, self.module, self.reach.functions)
        found = self.reach.classify(node, self.scope, self.module) if enqueue is None else None
        if enqueue is not None:
            jobs.append(JobUse((), enqueue, self.module))
        elif found is not None:
            network.append(NetworkUse((), found, self.scope, self.module))
        else:
            for callee in self.reach.runs(node, self.scope, self.module):
                uses, cut = self.reach.walk(callee)
                self.cut |= cut
                hop = Hop(node, self.scope, self.module, callee)
                network.extend(use._replace(path=(hop, *use.path)) for use in uses.network[: MAX_USES - len(network)])
                jobs.extend(use._replace(path=(hop, *use.path)) for use in uses.jobs[: MAX_USES - len(jobs)])
        # A function handed to `map` and iterated, or a `key=`, is called here (`list(map(task.delay, ids))`).
        for applied in applied_callables(node, self.scope, self.module):
            self.visit_Call(called_in_place(applied))
        # The arguments run too (`requests.post(url, data=payload())`).
        self.generic_visit(node)


def called_in_place(function: ast.expr) -> ast.Call:
    """A call of the function object `function`, where it stands, as a builtin it is handed to calls it."""
    return ast.copy_location(ast.Call(func=function, args=[], keywords=[]), function)
