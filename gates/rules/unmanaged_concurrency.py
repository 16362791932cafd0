"""CRL101-CRL105, CRL107: a reference to an API that starts unmanaged work, outside infra and tests.

Importing it by name, naming it as an attribute, calling it, subclassing it, passing it as a value or a
default: each is a finding, because each is a way for domain code to start work nobody bounds or stops.
So is the same reference to a spawner a project module re-exports under the spawner's own name (`from
app.infra.compat import Thread`, where compat says `from threading import Thread`), in a file whose imports
name a spawner: infra may own threads,
it may not hand the raw class out (except under `Manager` and `Task`, names most projects give classes of
their own). The message names where it came from. A function or class the project
defines (an infra helper that starts the thread itself) is not followed, also when it rebinds the imported
name at top level (`from threading import Thread` then `class Thread(Thread)`: the last unconditional
binding is what importers get; one under `if`/`try` keeps the import a candidate).

Some spawners are judged only where they are called, because their names are also types (`asyncio.Task` in
an `isinstance`, `subprocess.Popen` in a signature) or because the call decides whether the work outlives
it: `subprocess.Popen(...)` and `asyncio.create_subprocess_exec/_shell(...)` unless the same scope waits for
the process (the item of a `with`, `.wait()`/`.communicate()` called on it at once or on the name it is
bound to), `os.spawn*(mode, ...)` unless the mode is `os.P_WAIT`, and `asyncio.Task(coro)` always. Servers
that start a thread or a process per request (`socketserver.ThreadingMixIn`/`ForkingMixIn` and the
`Threading*`/`Forking*` servers, `http.server.ThreadingHTTPServer`), `os.posix_spawn*` and
`multiprocessing.Manager()` (a server process) are ordinary references.

A task is fire-and-forget unless the scope that starts it awaits it: `await create_task(...)`, or a task
(or a list of tasks: a literal, a comprehension, `.append`) bound to a name that the scope awaits, passes
to an awaited `gather`/`wait`/`wait_for`/`shield`, or iterates with `as_completed`. A task stored in an
attribute, returned or handed on outlives the scope: a finding.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.names import Scope
from corral.gates.analysis.scoped import ScopedVisitor, lines_mentioning, scoped_nodes
from corral.gates.analysis.values import StaticValues
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.knowledge import spawners
from corral.gates.knowledge.spawners import (
    AWAITABLE_TASKS,
    CALLED_ONLY,
    SPAWN_MODE_FUNCTIONS,
    SPAWN_WAITS,
    SPAWNER_NAMES,
    SPAWNERS,
    TASK_WAITERS,
    TASKS_ITERATED,
    WAITED_FOR,
    WAITING_METHODS,
    display_name,
    imports_spawner_module,
    may_import,
    spawner_kind,
)
from corral.gates.rules.base import Rule
from corral.gates.source.prefilter import Source

ADVICE = "outside infra; enqueue a job or call an infra helper instead"
# A re-export is followed only under a spawner's own name, and only in a file whose imports name one.
# Not under names most projects give classes of their own (Django's `Manager`, Celery's `Task`): every
# models module would be read for a re-export that is never there.
COMMON_NAMES = frozenset({b"Manager", b"Task"})
_REEXPORTED = sorted(set(SPAWNER_NAMES) - COMMON_NAMES)
LEAF_NAMES = frozenset(name.decode() for name in _REEXPORTED)
_SPAWNER_WORD = re.compile(rb"(?<![\w\x80-\xff])(?:" + rb"|".join(_REEXPORTED) + rb")(?![\w\x80-\xff])")


# A spawner's own name as an attribute (`compat.Thread`), and the spawner modules a dotted name ends in
# when it is the plain API (`threading.Thread`, `concurrent.futures.ThreadPoolExecutor`), not a re-export.
_SPAWNER_ATTRIBUTE = re.compile(rb"\.(?:" + rb"|".join(_REEXPORTED) + rb")(?![\w\x80-\xff])")
_OWNER = re.compile(rb"([A-Za-z_][\w]*)$")
_SPAWNER_MODULE_NAMES = frozenset(
    b"threading _thread multiprocessing pool futures asyncio loop subprocess os pty socketserver server".split()
)


def may_use_reexports(source: Source) -> bool:
    """Whether the file's imports name a spawner (`from app.infra.compat import Thread`), or a spawner's name
    follows a name other than a spawner module's (`compat.Thread(...)` after `from app.infra import
    compat`): the only files where the rule follows a re-export, so the prefilter admits them and skipping
    any other hides nothing."""
    if source.imports_any(*_REEXPORTED) and _SPAWNER_WORD.search(source.imports) is not None:
        return True
    data = source.data
    for match in _SPAWNER_ATTRIBUTE.finditer(data):
        owner = _OWNER.search(data, max(0, match.start() - 64), match.start())
        if owner is not None and owner.group(1) not in _SPAWNER_MODULE_NAMES:
            return True
    return False


# Stands for an expression that starts nothing in `UnmanagedConcurrency.waited`.
_NOT_A_CALL = ast.Call(func=ast.Name(id="", ctx=ast.Load()), args=[], keywords=[])


def _started(expression: ast.expr) -> ast.Call:
    """The call an expression starts a process with (`Popen(...)`, `await create_subprocess_exec(...)`)."""
    if isinstance(expression, ast.Await):
        expression = expression.value
    return expression if isinstance(expression, ast.Call) else _NOT_A_CALL


class UnmanagedConcurrency(Rule, ScopedVisitor):
    THREAD: ClassVar[str] = "CRL101"
    PROCESS: ClassVar[str] = "CRL102"
    EXECUTOR: ClassVar[str] = "CRL103"
    TASK: ClassVar[str] = "CRL104"
    LOOP_METHOD: ClassVar[str] = "CRL105"
    CONFIGURED: ClassVar[str] = "CRL107"
    codes: ClassVar[dict[str, str]] = {
        THREAD: "a thread started outside infra",
        PROCESS: "a process forked or started outside infra",
        EXECUTOR: "a thread or process pool outside infra",
        TASK: "a fire-and-forget asyncio task outside infra",
        LOOP_METHOD: "create_task or run_in_executor on an event loop outside infra",
        CONFIGURED: "a spawner named in extend-spawners outside infra",
    }
    # The code each kind of spawner in `knowledge.spawners` is reported under.
    CODE_FOR_KIND: ClassVar[dict[str, str]] = {
        spawners.THREAD: THREAD,
        spawners.PROCESS: PROCESS,
        spawners.EXECUTOR: EXECUTOR,
        spawners.TASK: TASK,
        spawners.LOOP_METHOD: LOOP_METHOD,
        spawners.CONFIGURED: CONFIGURED,
    }
    # Every finding's line (an alias's too, where it is bound) names the API itself as a whole word, and
    # the file's imports name the package the API comes from (`spawners.SPAWNER_NAMES`).

    VALID = (
        """
        import threading
        lock = threading.Lock()
        local = threading.local()
        threading.current_thread()
        """,
        """
        import asyncio
        async def main():
            async with asyncio.TaskGroup() as tg:
                tg.create_task(work())
            await asyncio.gather(a(), b())
            await asyncio.wait_for(c(), 5)
            await asyncio.to_thread(f)
        asyncio.run(main())
        """,
        """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from threading import Thread
        """,
        """
        import threading
        def join(worker: threading.Thread) -> threading.Thread:
            worker.join()
            return worker
        """,
        """
        def go(scheduler, executor):
            scheduler.create_task(job)
            executor.submit(job)
            scheduler.start()
        """,
        """
        def shadowed(threading):
            threading.Thread()
        """,
        """
        import subprocess
        def run(command):
            with subprocess.Popen(command) as process:
                process.poll()
            return subprocess.Popen(command).wait()
        """,
    )
    INVALID = (
        """
        import threading
        threading.Thread(target=work).start()  # error: 1 CRL101 "threading.Thread"
        """,
        """
        # corral-config: extend-spawners = ["gevent.spawn"]
        import gevent
        gevent.spawn(work)  # error: 1 CRL107 "gevent.spawn outside infra"
        """,
        """
        from threading import Thread  # error: 23 CRL101 "threading.Thread"
        class Worker(Thread):  # error: 14 CRL101 "threading.Thread"
            pass
        """,
        """
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        ctx.Process(target=f)  # error: 1 CRL102 "multiprocessing.Process"
        """,
        """
        import os
        pid = os.fork()  # error: 7 CRL102 "os.fork"
        """,
        """
        from concurrent import futures
        pool = futures.ThreadPoolExecutor(4)  # error: 8 CRL103 "concurrent.futures.ThreadPoolExecutor"
        """,
        """
        import asyncio
        spawn = asyncio.create_task  # error: 9 CRL104 "asyncio.create_task"
        spawn(work())  # error: 1 CRL104 "asyncio.create_task"
        """,
        """
        import asyncio
        def f():
            loop = asyncio.get_running_loop()
            loop.run_in_executor(None, g)  # error: 5 CRL105 "loop.run_in_executor"
        """,
        """
        import asyncio
        def f(loop: asyncio.AbstractEventLoop):
            loop.create_task(g())  # error: 5 CRL105 "loop.create_task"
        """,
        """
        def f():
            from asyncio import ensure_future  # error: 25 CRL104 "asyncio.ensure_future"
            ensure_future(g())  # error: 5 CRL104 "asyncio.ensure_future"
        """,
        """
        import threading
        def f(factory=threading.Timer):  # error: 15 CRL101 "threading.Timer"
            return factory
        """,
        """
        import subprocess
        def start(command):
            subprocess.Popen(command)  # error: 5 CRL102 "subprocess.Popen whose process this scope does not wait"
        """,
    )

    def __init__(self, context: FileContext) -> None:
        Rule.__init__(self, context)
        self.extra = context.config.extend_spawners
        # A finding's line names the API itself or an alias bound to it.
        words = {name.rpartition(".")[2] for name in (*SPAWNERS, *self.extra)}
        words.update(
            alias
            for scope in (context.names.root, *context.names.scopes.values())
            for alias in scope.bindings
            if any(
                spawner_kind(target, self.extra) is not None or target.rpartition(".")[2] in LEAF_NAMES
                for target in scope.targets(alias)
            )
        )
        ScopedVisitor.__init__(self, context.names, lines_mentioning(context.text, words))
        self.found: list[Finding] = []
        self.follows_reexports = may_use_reexports(
            Source(context.text.encode(), context.relpath, str(context.config.root))
        )
        self._waited: set[ast.Call] | None = None
        self._awaited: set[ast.Call] | None = None

    @classmethod
    def code_for(cls, name: str | None, extra: tuple[str, ...] = ()) -> str | None:
        """The code a reference to the resolved `name` is reported under (`extra`: the configured
        `extend-spawners`), or None when it starts nothing."""
        kind = spawner_kind(name, extra)
        # Those judged only where they are called are reported by `visit_Call`.
        return None if kind is None or name in CALLED_ONLY else cls.CODE_FOR_KIND[kind]

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        for name in config.extend_spawners:
            module, _, leaf = name.rpartition(".")
            if source.has_word(leaf.encode()) and may_import(source, module):
                return True
        if source.holds(imports_spawner_module) and any(
            any(may_import(source, package) for package in packages) and source.has_word(name)
            for name, packages in SPAWNER_NAMES.items()
        ):
            return True
        return source.holds(may_use_reexports)

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        yield from self.found

    def _report(self, node: ast.AST, name: str, code: str) -> None:
        self.found.append(self.context.finding(node, code, f"{display_name(name)} {ADVICE}"))

    def _reexported(self, node: ast.AST, names: list[str], shown: str) -> bool:
        """Report `node` when one of `names` is a spawner re-exported by project modules; False when none is."""
        for name in names:
            if not self.follows_reexports or name.rpartition(".")[2] not in LEAF_NAMES:
                continue
            origins = StaticValues.of(self.context).project.origins(name)
            for origin, chain in origins or ():
                code = self.code_for(origin, self.extra)
                if code is not None:
                    message = f"{shown} ({display_name(origin)} re-exported by {', '.join(chain)}) {ADVICE}"
                    self.found.append(self.context.finding(node, code, message))
                    return True
        return False

    def _check_reference(self, node: ast.Name | ast.Attribute) -> bool:
        if not isinstance(node.ctx, ast.Load):
            return False
        # Any candidate binding that is a spawner makes the reference one (`threading` bound to both
        # `threading` and `dummy_threading` by a try/except import).
        candidates = self.names.resolve_all(node, self.scope, attributes=True)
        if any(name in CALLED_ONLY for name in candidates):
            return True  # judged where it is called (`visit_Call`)
        for name in candidates:
            code = self.code_for(name, self.extra)
            if code is not None:
                self._report(node, name, code)
                return True
        return self._reexported(node, candidates, ast.unparse(node))

    def visit_Name(self, node: ast.Name) -> None:
        self._check_reference(node)

    def visit_Call(self, node: ast.Call) -> None:
        candidates = self.resolve_all(node.func)
        starts = self.names.resolve_all(node.func, self.scope, attributes=True)
        if any(name in AWAITABLE_TASKS for name in starts) and node in self.awaited:
            # A task this scope awaits: its spawner is named here, but nothing outlives the scope.
            for part in (*node.args, *node.keywords):
                self.visit(part)
            return
        name = next((name for name in candidates if name in CALLED_ONLY), None)
        if name is None and self.follows_reexports:
            # `from app.compat import Popen` then `Popen(...)`: judged as the spawner it re-exports.
            origins = (
                origin
                for candidate in candidates
                if candidate.rpartition(".")[2] in LEAF_NAMES
                for origin, _ in StaticValues.of(self.context).project.origins(candidate) or ()
            )
            name = next((origin for origin in origins if origin in CALLED_ONLY), None)
        if name is not None:
            self._check_called(node, name)
        self.generic_visit(node)

    def _check_called(self, call: ast.Call, name: str) -> None:
        """A spawner that starts work only when called: reported unless this call provably waits for it."""
        code = self.CODE_FOR_KIND[SPAWNERS[name]]
        shown = display_name(name)
        if name in SPAWN_MODE_FUNCTIONS:
            mode = self.resolve(call.args[0]) if call.args else None
            if mode == SPAWN_WAITS:
                return
            why = "with a mode the gate cannot read" if mode is None else f"with {mode.rpartition('.')[2]}"
            message = f"{shown} {why} (only os.P_WAIT waits for the process) {ADVICE}"
        elif name in WAITED_FOR:
            if call in self.waited:
                return
            message = f"{shown} whose process this scope does not wait for (with, .wait(), .communicate()) {ADVICE}"
        else:
            message = f"{shown} {ADVICE}"
        self.found.append(self.context.finding(call, code, message))

    @property
    def awaited(self) -> set[ast.Call]:
        """The calls starting a task their own scope awaits: `await create_task(...)`, a task (or a list of
        them, built by a literal, a comprehension or `.append`) bound to a name the binding scope awaits,
        passes to an awaited `gather`/`wait`/`wait_for`/`shield`, or iterates with `as_completed`.
        Computed once per file, only when a file names a task starter in a call."""
        if self._awaited is not None:
            return self._awaited
        awaited: set[ast.Call] = set()
        bound: list[tuple[ast.Call, str, Scope]] = []
        awaits: set[tuple[str, Scope]] = set()

        def named(expression: ast.expr, scope: Scope) -> None:
            if isinstance(expression, ast.Starred):
                expression = expression.value
            if isinstance(expression, ast.Call):
                awaited.add(expression)
            elif isinstance(expression, ast.Name) and (binder := scope.binder(expression.id)) is not None:
                awaits.add((expression.id, binder))
            elif isinstance(expression, (ast.List, ast.Tuple, ast.Set)):
                for element in expression.elts:
                    named(element, scope)

        def bind(name: str, value: ast.expr, scope: Scope) -> None:
            binder = scope.binder(name)
            if binder is None:
                return
            if isinstance(value, ast.Call):
                bound.append((value, name, binder))
            elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
                for element in value.elts:
                    bind(name, element, scope)
            elif isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                bind(name, value.elt, scope)

        for node, scope in scoped_nodes(self.context.tree, self.names):
            if isinstance(node, ast.Await):
                value = node.value
                if isinstance(value, ast.Call) and any(
                    name in TASK_WAITERS for name in self.names.resolve_all(value.func, scope)
                ):
                    for argument in value.args:
                        named(argument, scope)
                else:
                    named(value, scope)
            elif isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call):
                if any(name in TASKS_ITERATED for name in self.names.resolve_all(node.iter.func, scope)):
                    for argument in node.iter.args:
                        named(argument, scope)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    bind(targets[0].id, node.value, scope)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "add")
                and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1
            ):
                bind(node.func.value.id, node.args[0], scope)
        awaited.update(call for call, name, binder in bound if (name, binder) in awaits)
        self._awaited = awaited
        return awaited

    @property
    def waited(self) -> set[ast.Call]:
        """The calls starting a process that their own scope waits for: the item of a `with`, a call whose
        `.wait()`/`.communicate()` is called at once, or one bound to a name that the scope binding it
        calls `.wait()`/`.communicate()` on. Computed once per file, only when a file starts one."""
        if self._waited is not None:
            return self._waited
        waited: set[ast.Call] = set()
        bound: list[tuple[ast.Call, str, Scope]] = []
        waits: set[tuple[str, Scope]] = set()
        # `for process in processes:`: waiting for the loop's name waits for each of the list's.
        iterated: dict[tuple[str, Scope], tuple[str, Scope]] = {}
        for node, scope in scoped_nodes(self.context.tree, self.names):
            if (
                isinstance(node, (ast.For, ast.AsyncFor))
                and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Name)
            ):
                element, collection = scope.binder(node.target.id), scope.binder(node.iter.id)
                if element is not None and collection is not None:
                    iterated[(node.target.id, element)] = (node.iter.id, collection)
            if isinstance(node, (ast.With, ast.AsyncWith)):
                waited.update(_started(item.context_expr) for item in node.items)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in WAITING_METHODS:
                    receiver = node.func.value
                    waited.add(_started(receiver))
                    binder = scope.binder(receiver.id) if isinstance(receiver, ast.Name) else None
                    if isinstance(receiver, ast.Name) and binder is not None:
                        waits.add((receiver.id, binder))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    binder = scope.binder(targets[0].id)
                    value = node.value
                    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                        value = value.elt  # a list of processes, each waited for where the list is
                    if binder is not None:
                        bound.append((_started(value), targets[0].id, binder))
        waits.update(iterated[wait] for wait in list(waits) if wait in iterated)
        waited.update(call for call, name, binder in bound if (name, binder) in waits)
        waited.discard(_NOT_A_CALL)
        self._waited = waited
        return waited

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self._check_reference(node):
            self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        origin = self.names.absolute_module(node.level, node.module)
        for alias in node.names:
            name = f"{origin}.{alias.name}"
            code = self.code_for(name, self.extra)
            if code is not None:
                self._report(alias, name, code)
            elif origin:
                self._reexported(alias, [name], alias.name)
