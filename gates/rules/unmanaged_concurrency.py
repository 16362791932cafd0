"""CRL101-CRL105, CRL107: a reference to an API that starts unmanaged work, outside infra and tests.

Importing it by name, naming it as an attribute, calling it, subclassing it, passing it as a value or a
default: each is a finding, because each is a way for domain code to start work nobody bounds or stops.
So is the same reference to a spawner a project module re-exports under the spawner's own name (`from
app.infra.compat import Thread`, where compat says `from threading import Thread`), in a file whose imports
name a spawner: infra may own threads,
it may not hand the raw class out. The message names where it came from. A function or class the project
defines (an infra helper that starts the thread itself) is not followed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.scoped import ScopedVisitor, lines_mentioning
from corral.gates.analysis.values import StaticValues
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.knowledge import spawners
from corral.gates.knowledge.spawners import (
    SPAWNER_NAMES,
    SPAWNERS,
    display_name,
    imports_spawner_module,
    may_import,
    spawner_kind,
)
from corral.gates.rules.base import Rule
from corral.gates.source.prefilter import Source

ADVICE = "outside infra; enqueue a job or call an infra helper instead"
# A re-export is followed only under a spawner's own name, and only in a file whose imports name one.
LEAF_NAMES = frozenset(name.decode() for name in SPAWNER_NAMES)
_SPAWNER_WORD = re.compile(rb"(?<![\w\x80-\xff])(?:" + rb"|".join(sorted(SPAWNER_NAMES)) + rb")(?![\w\x80-\xff])")


def may_use_reexports(source: Source) -> bool:
    """Whether the file's imports name a spawner (`from app.infra.compat import Thread`): the only files
    where the rule follows a re-export, so the prefilter admits them and skipping any other hides nothing."""
    return source.imports_any(*SPAWNER_NAMES) and _SPAWNER_WORD.search(source.imports) is not None


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
        self.follows_reexports = may_use_reexports(Source(context.text.encode(), context.relpath))

    @classmethod
    def code_for(cls, name: str | None, extra: tuple[str, ...] = ()) -> str | None:
        """The code a reference to the resolved `name` is reported under (`extra`: the configured
        `extend-spawners`), or None when it starts nothing."""
        kind = spawner_kind(name, extra)
        return None if kind is None else cls.CODE_FOR_KIND[kind]

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
        for name in candidates:
            code = self.code_for(name, self.extra)
            if code is not None:
                self._report(node, name, code)
                return True
        return self._reexported(node, candidates, ast.unparse(node))

    def visit_Name(self, node: ast.Name) -> None:
        self._check_reference(node)

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
