"""The job frameworks CRL2 knows, one module each, in `FRAMEWORKS`; and `job_kinds`, what a file declares.

One place answers "what job kinds does this file declare, and what hard timeout provably applies?" for
the CRL2 rules, the `jobs` report, `corral prove` and `corral fix`. Each framework module holds one
`Framework` (see `base.py`) named `FRAMEWORK`; `walk.py` walks a module and hands each its nodes. The order
of `FRAMEWORKS` is the order of the CRL2 rule's codes, examples and prefilter words, and where two
frameworks claim the same node, the first listed reads it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from corral.gates.analysis.modules import Dependency, ModuleInfo, ProjectModules, run_memo
from corral.gates.analysis.values import StaticValues
from corral.gates.frameworks import arq, celery, corral, dramatiq, huey, procrastinate, rq, saq, taskiq
from corral.gates.frameworks.base import Framework, Function, JobKind
from corral.gates.frameworks.walk import Dispatch, Finder, may_use_wrappers
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
        source = Source(context.text.encode(), context.relpath)
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
    body (a Huey task: `Framework.call_enqueues`). Decorators are read as `job_kinds` reads them, wrappers
    through other project modules excepted. Answered once per run; each file asking depends on what it read."""
    if not function.decorator_list:
        return False
    memo: dict[Function, tuple[bool, dict[str, Dependency]]] = run_memo("call enqueues")
    known = memo.get(function)
    if known is None:
        with project.recording() as read:
            finder = Finder(StaticValues(module, project), _ENQUEUING, strict=False, follows_wrappers=False)
            defined_in = module.names.scope_of(function).parent or module.names.root
            enqueues = any(kind.function is function for kind in finder.declared_by(function, defined_in))
        known = memo[function] = (enqueues, read)
    else:
        project.replay(known[1])
    return known[0]
