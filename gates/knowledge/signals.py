"""Django signals the project defines, and the receivers a `send` runs: `ProjectSignals.receivers(call, ...)`.

A signal is a module-level `name = Signal(...)` (`django.dispatch.Signal`, however imported) of a project
module, named by its defining module (`app.signals.order_paid`) wherever it is used or re-exported from. Its
receivers are the functions connected to it anywhere in the project: decorated with `@receiver(signal)` /
`@receiver([a, b])` (`django.dispatch.receiver`), or passed to `signal.connect(fn)` (at module level or in a
function such as `AppConfig.ready`). The files read are those whose bytes name `receiver` or `.connect(`
(a project scan, a dependency of the checked file like every module parsed).

A receiver connected with `sender=` runs for a `send(sender=...)` naming the same class only, so it is
followed only then. Not followed: Django's own signals (`post_save` and the like, sent by `Model.save()`
and the ORM: far too implicit to attribute to a call), signals defined anywhere but at module level or
through anything but `Signal(...)`, receivers connected through an object of unknown type, by
`getattr`, behind `if TYPE_CHECKING:`, or with `.connect` spelled other than `.connect(`.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from corral.gates.analysis.modules import MAX_REEXPORTS, ModuleInfo
from corral.gates.analysis.names import LOCAL, Scope
from corral.gates.analysis.project import Callee, ProjectFunctions
from corral.gates.analysis.scoped import ScopedVisitor

SIGNALS = frozenset({"django.dispatch.Signal", "django.dispatch.dispatcher.Signal"})
RECEIVER_DECORATORS = frozenset({"django.dispatch.receiver", "django.dispatch.dispatcher.receiver"})
SENDS = frozenset({"send", "send_robust"})


class Receiver(NamedTuple):
    """A function connected to a signal, where it was connected (`relpath:line`), and the sender it is
    limited to (a qualified name), if any."""

    callee: Callee
    where: str
    sender: str | None


class ProjectSignals:
    """The project's signals and their receivers, seen from one checked file (read on first use)."""

    def __init__(self, functions: ProjectFunctions) -> None:
        self.functions = functions
        self.project = functions.project
        self._receivers: dict[str, list[Receiver]] | None = None

    def sent(self, call: ast.Call, scope: Scope, module: ModuleInfo) -> str | None:
        """The qualified name of the project signal `call` sends (`x.send(...)`, `x.send_robust(...)`)."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in SENDS):
            return None
        return self.signal(func.value, scope, module)

    def receivers(self, call: ast.Call, signal: str, scope: Scope, module: ModuleInfo) -> list[Receiver]:
        """The receivers a send of `signal` made by `call` runs, in the order they were found."""
        given = next((keyword.value for keyword in call.keywords if keyword.arg == "sender"), None)
        if given is None and call.args:
            given = call.args[0]
        sender = qualified(given, scope, module) if given is not None else None
        return [
            receiver
            for receiver in self._index().get(signal, [])
            if receiver.sender is None or receiver.sender == sender
        ]

    def signal(self, expression: ast.expr, scope: Scope, module: ModuleInfo) -> str | None:
        """The qualified name of the project signal `expression` names, following re-exports."""
        dotted = qualified(expression, scope, module)
        for _ in range(MAX_REEXPORTS + 1):
            if dotted is None:
                return None
            owner, _, name = dotted.rpartition(".")
            defining = self.project.module(owner) if owner else None
            if defining is None:
                return None
            sites = defining.bindings.get(name, [])
            if len(sites) != 1:
                return None
            site = sites[0]
            if isinstance(site, ast.ImportFrom):
                dotted = defining.names.root.lookup(name)
                continue
            if isinstance(site, ast.Call) and defining.names.resolve(site.func, defining.names.root) in SIGNALS:
                return dotted
            return None
        return None

    def _index(self) -> dict[str, list[Receiver]]:
        if self._receivers is None:
            self._receivers = {}
            scans = (*self.project.files_containing(b"receiver"), *self.project.files_containing(b".connect("))
            relpaths = dict.fromkeys(scans)
            for relpath in relpaths:
                module = self.project.file(relpath)
                if module is not None:
                    _Connections(self, module).collect(self._receivers)
        return self._receivers


def qualified(expression: ast.expr, scope: Scope, module: ModuleInfo) -> str | None:
    """The dotted name `expression` refers to, a name bound at the module's top level qualified by the
    module (`app.signals.order_paid`); None when unknown."""
    if isinstance(expression, ast.Name):
        binder = scope.binder(expression.id)
        if binder is not None and binder is module.names.root and binder.bindings[expression.id] == LOCAL:
            return f"{module.names.module}.{expression.id}"
    return module.names.resolve(expression, scope)


class _Connections(ScopedVisitor):
    """The receivers one module connects (skipping `if TYPE_CHECKING:` code, as every walk does)."""

    def __init__(self, signals: ProjectSignals, module: ModuleInfo) -> None:
        super().__init__(module.names)
        self.signals = signals
        self.module = module
        self.found: list[tuple[str, Receiver]] = []

    def collect(self, index: dict[str, list[Receiver]]) -> None:
        self.visit(self.module.tree)
        for signal, receiver in self.found:
            index.setdefault(signal, []).append(receiver)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if not (isinstance(decorator, ast.Call) and self.resolve(decorator.func) in RECEIVER_DECORATORS):
                continue
            sender = self._sender(decorator)
            given = decorator.args[0] if decorator.args else None
            named = list(given.elts) if isinstance(given, (ast.List, ast.Tuple)) else [given] if given else []
            for expression in named:
                signal = self.signals.signal(expression, self.scope, self.module)
                if signal is not None:
                    callee = Callee(node, self.module, node.name)
                    self.found.append((signal, Receiver(callee, f"{self.module.relpath}:{node.lineno}", sender)))
        super()._visit_function(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "connect":
            target = node.args[0] if node.args else None
            target = next((keyword.value for keyword in node.keywords if keyword.arg == "receiver"), target)
            signal = self.signals.signal(func.value, self.scope, self.module) if target is not None else None
            if signal is not None and target is not None:
                sender = self._sender(node)
                connected = ast.Call(func=target, args=[], keywords=[])
                for callee in self.signals.functions.callees(connected, self.scope, self.module):
                    # Shown as the name it was connected by, where it is defined.
                    where = f"{callee.module.relpath}:{callee.function.lineno}"
                    self.found.append((signal, Receiver(callee, where, sender)))
        self.generic_visit(node)

    def _sender(self, call: ast.Call) -> str | None:
        given = next((keyword.value for keyword in call.keywords if keyword.arg == "sender"), None)
        if given is None:
            return None
        # A sender that cannot be named matches no send: the receiver is then never followed.
        return qualified(given, self.scope, self.module) or "<unknown sender>"
