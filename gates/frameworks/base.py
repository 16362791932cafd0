"""The contract every CRL2 job framework meets (`Framework`), and the vocabulary frameworks and the walk share.

A framework is one object (in its own module, listed in `corral.gates.frameworks.FRAMEWORKS`) that says what
the gate needs to know of it: the words its declarations leave in a file (the CRL2 prefilter is built from
them), how it recognises a job kind (a decorator named by its import, a method of an object one of its
calls made, a call, a dict literal, a settings class) and reads that kind's hard limit, its documented
default limit, the code its failing kinds get, what `corral prove` plants to turn its limit off and the
keyword `corral fix` adds. The walk over a module (`corral.gates.frameworks.walk.Finder`) hands each
framework the nodes it claims; the framework reports kinds back through the finder.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from corral.gates.analysis.names import Scope
from corral.gates.analysis.values import Located, StaticValues, Unresolved

if TYPE_CHECKING:
    from corral.gates.frameworks.walk import Finder, Made, Receivers
    from corral.gates.knowledge.network_reach import JobEnqueue

# The code of a failing kind whose framework has no code of its own, and of a limit the gate cannot read.
OTHER, UNRESOLVED = "CRL203", "CRL204"
OTHER_SUMMARY = "a job kind whose framework limit is turned off, absent, or not explicit under strict mode"

# The method `Framework.enqueued` is asked about for a call of a call (`group(...)()`): calling the receiver.
CALLED = "()"

# Where a kind's limit comes from (the `source` of the jobs report), for the sources several frameworks share.
DECORATOR, DEFAULT, BODY = "decorator", "framework default", "asyncio timeout in body"

Function = ast.FunctionDef | ast.AsyncFunctionDef


class JobKind(NamedTuple):
    """One declared job kind. `timeout` is the effective hard limit in seconds (None: none proven) and
    `source` where it comes from; `code`/`problem` say why it fails (None when it passes)."""

    framework: str
    name: str
    queue: str | None
    node: ast.expr
    function: Function | None
    timeout: float | None
    source: str | None
    code: str | None = None
    problem: str | None = None


class Limit(NamedTuple):
    """A limit read from one place: seconds, or why there is none (`off`), or unresolvable; `refused`: `off` is
    a value the framework raises on (not a limit turned off)."""

    seconds: float | None = None
    off: str | None = None
    unresolved: Unresolved | None = None
    refused: bool = False


UNSET = Limit()


class Words(NamedTuple):
    """What a framework's declarations leave in a file's bytes, for the CRL2 prefilter.

    A file importing one of `packages` may declare a kind when it holds one of `declaring` (the names its
    decorators and methods contain); `methods` are method names that declare a kind on an object a project
    module may have made (`app.task`), so a file naming one right after a dot is read whatever it imports.
    A framework whose settings and calls can be spelled in more ways than are worth looking for is
    `always_read` in a file importing it."""

    packages: tuple[bytes, ...]
    declaring: tuple[bytes, ...] = ()
    methods: tuple[str, ...] = ()
    always_read: bool = False


class Decoration(NamedTuple):
    """A decorator on a function: the whole decorator, its call (None when bare), the function, the scope the
    decorator is evaluated in, the object whose method it is when it is one (the `Celery(...)` call of
    `@app.task`), and the calls of the project factory functions that object was made through."""

    node: ast.expr
    call: ast.Call | None
    function: Function
    scope: Scope
    owner: Located | None
    factories: tuple[Located, ...] = ()


class EnqueuePlant(NamedTuple):
    """What `corral prove` writes to plant a CRL402 with a framework: the import binding its task decorator to
    `{name}`, the decorator's arguments (a limit, so CRL2 stays quiet) and the method that enqueues the task."""

    imports: str
    arguments: str
    method: str


class Framework:
    """One job framework CRL2 knows. Subclasses set the class attributes and override the hooks that
    recognise its declarations; every hook reports kinds through `finder.add` / `finder.fail`."""

    name: ClassVar[str]
    words: ClassVar[Words]
    # The code of its kinds without a hard limit, and that code's summary (shared with other frameworks: OTHER).
    code: ClassVar[str] = OTHER
    summary: ClassVar[str] = OTHER_SUMMARY
    # The documented hard limit, in seconds, a kind gets when it declares none (None: no default limit).
    default_limit: ClassVar[float | None] = None
    # What `corral prove` writes after a copy of the framework's decorator to declare a kind with the limit
    # turned off (None: prove plants nothing for it).
    no_limit_arguments: ClassVar[str | None] = None
    # The keyword `corral fix` sets on a failing declaring decorator (None: fix leaves the framework alone).
    # Fix finds its targets by `code`, so a framework with a keyword has a code of its own.
    fix_keyword: ClassVar[str | None] = None
    # Dotted names of the decorators that declare a kind (`decorated` reads them, with no owner).
    decorators: ClassVar[frozenset[str]] = frozenset()
    # Dotted names of the calls that declare a kind (`called` reads them).
    calls: ClassVar[frozenset[str]] = frozenset()
    # Names of the methods whose calls declare a kind on an object one of its calls made (`app.register_task`,
    # `queue.enqueue`; `owns_call` says which, `method_called` reads them). Also in `words.methods`.
    call_methods: ClassVar[frozenset[str]] = frozenset()
    # Whether calling a kind's function enqueues the job rather than running its body (Huey): the network rules
    # then do not follow the call. A framework whose decorated function still runs when called leaves it False.
    call_enqueues: ClassVar[bool] = False
    # The methods whose call may enqueue a job of this framework (`send_receipt.delay()`, `queue.enqueue(fn)`;
    # `CALLED` for a call of what a call returns): `enqueued` is asked only about these (CRL402).
    enqueue_methods: ClassVar[frozenset[str]] = frozenset()
    # What `corral prove` plants for CRL402 with this framework (None: it plants none with it).
    enqueue_plant: ClassVar[EnqueuePlant | None] = None
    # Rule examples (see `corral.gates.rules.base.Rule`), joined into the CRL2 rule's own.
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()

    def owns_method(self, made: str, attribute: str) -> bool:
        """Whether `@x.<attribute>` declares a kind of this framework when `x` was made by a call to `made`."""
        return False

    def owns_call(self, made: str, attribute: str) -> bool:
        """Whether a call of `x.<attribute>(...)` declares a kind of this framework when `x` was made by `made`."""
        return False

    def decorated(self, finder: Finder, site: Decoration) -> None:
        """A decorator in `decorators`, or a method `owns_method` claims."""

    def called(self, finder: Finder, call: ast.Call, scope: Scope) -> None:
        """A call to one of `calls`, not already read as part of another declaration."""

    def method_called(self, finder: Finder, call: ast.Call, scope: Scope, made: Made) -> None:
        """A call of a method `owns_call` claims."""

    def enqueued(self, call: ast.Call, method: str, receivers: Receivers) -> JobEnqueue | None:
        """The job `call` enqueues when it is `<receiver>.<method>(...)` (`method` one of `enqueue_methods`) on a
        task, app, queue or broker of this framework that `receivers` can tell; None otherwise (no guessing)."""
        return None

    def mapping(self, finder: Finder, node: ast.Dict, scope: Scope) -> None:
        """Every dict literal of the module (settings given as a dict)."""

    def class_body(self, finder: Finder, cls: ast.ClassDef, scope: Scope) -> None:
        """Every class of the module (settings given as a class)."""


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for item in call.keywords:
        if item.arg == name:
            return item
    return None


def has_double_star(call: ast.Call) -> bool:
    return any(item.arg is None for item in call.keywords)


def string_argument(call: ast.Call, values: StaticValues, scope: Scope | None, position: int = 0) -> str | None:
    if len(call.args) > position:
        found = values.string(call.args[position], scope)
        return found if isinstance(found, str) else None
    return None


def string_keyword(call: ast.Call | None, name: str, values: StaticValues, scope: Scope | None) -> str | None:
    found = keyword(call, name) if call is not None else None
    if found is None:
        return None
    text = values.string(found.value, scope)
    return text if isinstance(text, str) else None


def shown(value: float) -> str:
    """A number of seconds as messages write it (`30`, not `30.0`)."""
    return str(int(value)) if value == int(value) else str(value)
