"""The job frameworks CRL2 knows, one module each, in `FRAMEWORKS`; `job_kinds`, what a file declares; and
`enqueue_of`, which calls enqueue a job (CRL402).

One place answers "what job kinds does this file declare, and what hard timeout provably applies?" for
the CRL2 rules, the `jobs` report, `corral prove` and `corral fix`. Each framework module holds one
`Framework` (see `base.py`) named `FRAMEWORK`; `walk.py` walks a module and hands each its nodes. The order
of `FRAMEWORKS` is the order of the CRL2 rule's codes, examples and prefilter words, and where two
frameworks claim the same node, the first listed reads it.
"""

from __future__ import annotations

import ast
import weakref
from typing import TYPE_CHECKING

from corral.gates.analysis.modules import ModuleInfo, ProjectModules
from corral.gates.analysis.names import Scope
from corral.gates.analysis.project import ProjectFunctions
from corral.gates.analysis.values import StaticValues
from corral.gates.frameworks import arq, celery, corral, dramatiq, huey, procrastinate, rq, saq, taskiq
from corral.gates.frameworks.base import CALLED, Framework, Function, JobKind
from corral.gates.frameworks.walk import Dispatch, Finder, Receivers, declared_kinds, may_use_wrappers
from corral.gates.knowledge.network_reach import JobEnqueue
from corral.gates.source.prefilter import Source

if TYPE_CHECKING:
    from corral.gates.analysis.context import FileContext

FRAMEWORKS: tuple[Framework, ...] = (
    corral.FRAMEWORK,
    celery.FRAMEWORK,
    dramatiq.FRAMEWORK,
    rq.FRAMEWORK,
    arq.FRAMEWORK,
    saq.FRAMEWORK,
    taskiq.FRAMEWORK,
    huey.FRAMEWORK,
    procrastinate.FRAMEWORK,
)
BY_NAME = {framework.name: framework for framework in FRAMEWORKS}
_DISPATCH = Dispatch(FRAMEWORKS)
# The frameworks whose kinds a call enqueues: only they read a called function's decorators (a Celery task's
# would have Celery look for the project's apps, for an answer that is no anyway).
_ENQUEUING = Dispatch([framework for framework in FRAMEWORKS if framework.call_enqueues])


def might_use_wrappers(source: Source) -> bool:
    """`walk.may_use_wrappers` for these frameworks: the part of the CRL2 prefilter for wrapped decorators."""
    return may_use_wrappers(source, _DISPATCH)


def job_kinds(context: FileContext) -> list[JobKind]:
    """Every job kind the checked file declares (computed once per file, shared by the CRL2 rules)."""
    known = _BY_CONTEXT.get(context)
    if known is None:
        source = Source(context.text.encode(), context.relpath, str(context.config.root))
        follows_wrappers = may_use_wrappers(source, _DISPATCH)
        finder = Finder(
            StaticValues.of(context), _DISPATCH, strict=context.config.strict, follows_wrappers=follows_wrappers
        )
        finder.walk(context.tree.body, context.names.root)
        known = _BY_CONTEXT[context] = finder.kinds
    return known


_BY_CONTEXT: weakref.WeakKeyDictionary[FileContext, list[JobKind]] = weakref.WeakKeyDictionary()


def call_enqueues(function: Function, module: ModuleInfo, project: ProjectModules) -> bool:
    """Whether calling `function` (of `module`) enqueues a job kind its decorators declare rather than running its
    body (a Huey task: `Framework.call_enqueues`). Answered once per run; each file asking depends on what it read."""
    return bool(declared_kinds(function, module, project, _ENQUEUING))


def enqueue_of(call: ast.Call, scope: Scope, module: ModuleInfo, functions: ProjectFunctions) -> JobEnqueue | None:
    """The job `call` (in `scope` of `module`) enqueues: a framework's enqueue method on a task, app, queue or
    broker it can tell (`Framework.enqueued`, asked in `FRAMEWORKS` order), or the call of a project function
    whose call enqueues it (a Huey task). None for anything else: an unknown receiver is no enqueue."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else CALLED if isinstance(func, ast.Call) else None
    if method in _ENQUEUE_METHODS:
        receivers = Receivers(StaticValues(module, functions.project), scope, _DISPATCH)
        for framework in FRAMEWORKS:
            if method in framework.enqueue_methods:
                found = framework.enqueued(call, method, receivers)
                if found is not None:
                    return found
    if isinstance(func, (ast.Name, ast.Attribute)):
        # A task's call enqueues it whether or not it is a coroutine function awaited here.
        for callee in functions.callees(call, scope, module, runs_now=False):
            if call_enqueues(callee.function, callee.module, functions.project):
                return JobEnqueue(f"{callee.shown}()", call)
    return None


_ENQUEUE_METHODS = frozenset(method for framework in FRAMEWORKS for method in framework.enqueue_methods)
