"""Whether running a project function makes a network call now, and through which chain of calls.

`NetworkReach.of(callee)` walks the function's body as it runs when called: the network calls
`network.py` classifies, and the project functions it calls (`analysis/project.py` says which), followed
transitively with cycles cut. What runs later is not walked: functions and lambdas defined in the body but
not called there, callables handed on (`transaction.on_commit(send)`, `functools.partial(...)`), code
behind `if TYPE_CHECKING:`. The answer is the first network call found in source order, with the chain of
functions that leads to it and where it stands.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from corral.gates.analysis.modules import Dependency, ModuleInfo, run_memo
from corral.gates.analysis.project import Callee, Function, ProjectFunctions
from corral.gates.analysis.scoped import ScopedVisitor
from corral.gates.knowledge.network import NetworkCalls


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


class NetworkReach:
    """What project functions reach, seen from one checked file. Each function is walked once per run in
    this process, whichever file reaches it first: its answer, and the files the walk read, serve every
    file that reaches it after."""

    def __init__(self, functions: ProjectFunctions) -> None:
        self.functions = functions
        self._known: dict[Function, tuple[Reached | None, dict[str, Dependency]]] = run_memo("network reach")
        self._walking: set[Function] = set()
        self._networks: dict[ModuleInfo, NetworkCalls] = run_memo("network calls")

    def of(self, callee: Callee) -> Reached | None:
        return self.walk(callee)[0]

    def network(self, module: ModuleInfo) -> NetworkCalls:
        known = self._networks.get(module)
        if known is None:
            known = self._networks[module] = NetworkCalls(module.tree, module.names)
        return known

    def walk(self, callee: Callee) -> tuple[Reached | None, bool]:
        """What `callee` reaches, and whether the answer is final: a function met again while it is being
        walked (a cycle) adds nothing there, so an empty answer that depended on it is not kept."""
        function = callee.function
        project = self.functions.project
        known = self._known.get(function)
        if known is not None:
            found, read = known
            project.replay(read)
            complete = True
        elif function in self._walking:
            return None, False
        else:
            self._walking.add(function)
            try:
                with project.recording() as read:
                    body = _Body(self, callee.module)
                    found = body.first(function)
            finally:
                self._walking.discard(function)
            complete = found is not None or body.complete
            if complete:
                # Kept without this hop: another call site may name the function differently.
                self._known[function] = (found, read)
        return (found._replace(hops=(callee.shown, *found.hops)) if found is not None else None), complete


class _Body(ScopedVisitor):
    """One function body as it runs when called, stopping at the first network call it reaches."""

    def __init__(self, reach: NetworkReach, module: ModuleInfo) -> None:
        super().__init__(module.names)
        self.reach = reach
        self.module = module
        self.network = reach.network(module)
        self.found: Reached | None = None
        self.complete = True

    def first(self, function: Function) -> Reached | None:
        self._visit_in_scope(self.names.scope_of(function), function.body)
        return self.found

    def visit(self, node: ast.AST) -> None:
        if self.found is None:
            super().visit(node)

    # Defined here, run later (or never): not part of this call.
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        return

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_Call(self, node: ast.Call) -> None:
        network = self.network.classify(node, self.scope)
        if network is not None:
            self.found = Reached((), network.api, self.module.relpath, node.lineno)
            return
        for callee in self.reach.functions.callees(node, self.scope, self.module):
            found, complete = self.reach.walk(callee)
            self.complete = self.complete and complete
            if found is not None:
                self.found = found
                return
        self.generic_visit(node)
