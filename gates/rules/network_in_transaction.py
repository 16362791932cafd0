"""CRL401-CRL402: a network call made, or a job enqueued, while a database transaction is open, outside tests
(infra included).

A transaction holds a pooled connection (and its locks) until it commits; a network call inside it holds
them for as long as the remote end takes, so a few slow endpoints drain the pool for everyone. A job enqueued
inside it (CRL402) is published at once: a worker can run it before the commit, reading rows that are not
there yet or acting on a change that is then rolled back. The enqueues are what the frameworks recognise
(`corral.gates.frameworks.enqueue_of`: a Celery task's `delay()`/`apply_async()`, signatures and canvases, an
app's `send_task()`; RQ queues' `enqueue*()` and `@job`'s `delay()`; Dramatiq's `send()`; arq's
`enqueue_job()`; taskiq's `kiq()`; a Huey task's call and `schedule()`; Procrastinate's `defer()` unless its
app writes through Django's connection inside a Django transaction; corral's `Runtime.enqueue()`/`publish()`
without `conn=`), on a task, app, queue or broker the gate can tell; a look-alike method of anything else is
not one. An enqueue is CRL402's only, never CRL401's too. The deferred forms (`transaction.on_commit(lambda:
...)`, `delay_on_commit()`) run after commit: not inside. The advice names the framework's own way out.
Django's `on_commit` waits for the commit of the database its `using=` names (the default one without it), and
Celery's `delay_on_commit()`/`apply_async_on_commit()` call it without `using=`: inside `atomic(using="orders")`
(any alias not literally "default", one the gate cannot resolve such as `settings.REPLICA_NAME` included) with
no default-database atomic open around it, they and what `on_commit` is handed without the same `using=` (the
same literal, or the same expression text) run at once: CRL402 (CRL401 for a network call), saying why, with
`transaction.on_commit(..., using=<alias>)` as the advice. Inside a transaction that is not Django's
(`session.begin()`, `conn.transaction()`) they run at once too. The alias of a wrapper's parameter
(`atomic(using=using)` in `def uow(using="default")`, a context manager, a decorator factory, or a wrapper of
one) is read at each use of the wrapper: the argument passed (`with uow("orders"):`, `@atomic_for("orders")`),
else the parameter's default; passed through `*args`/`**kwargs`, or by a wrapper that is a method or reached
through a `functools.partial`, it is taken as the default database.

Transaction scopes: the body of a `with`/`async with` whose item is Django's `transaction.atomic(...)` (however
imported) or a `.begin()`, `.begin_nested()`, `.transaction()` or `.atomic()` on any object (SQLAlchemy
sessions, engines and connections, psycopg 3, asyncpg, peewee), and the body of a function decorated with one of
those (`@transaction.atomic`, `@db.atomic()`, Django's `@method_decorator(transaction.atomic)`, a list of
decorators holding it included; on a class, `@method_decorator(transaction.atomic, name="dispatch")` makes the
method it names one), and a `with` of a name or `self.<attribute>` every binding of which is such a call (`tx =
transaction.atomic()` at module level or in the function, then `with tx:`; `self.tx = ...` in the class's
methods or `tx = ...` in its body, then `with self.tx:`; one imported from another module is not followed).
Items after the opening one in the same `with` are inside it. The project's own wrappers of them are scopes too
where they are used (`corral.gates.knowledge.transaction_scopes` says which): a `@contextmanager` whose every
`yield` is inside one, a class whose `__enter__` enters one, a decorator that runs its function inside one, a
plain function whose every `return` hands back one's call (`return transaction.atomic(using=using)`, entered or
applied as a decorator where it is used; one that may return anything else is not); the message names the
wrapper and where it opens the transaction. Network calls are what
`corral.gates.knowledge.network` classifies, also through a client another project module binds at module level
(`from app.clients import session` or `import app.clients as c`, then `session.post(...)`,
`c.session.post(...)`, re-exports included): the message names the client and where it is built.

Calls made inside a scope are followed to the bodies they run: functions and lambdas defined in the same
enclosing function, module-level functions of the same module, functions imported from other project modules
(re-exports included), methods of project classes (inherited ones too) called on `self`/`cls`, on the class, or
on an instance the gate can type (constructed or annotated in scope, held as an attribute the class assigns or
annotates, a module-level instance of this or another module), on `super()` in a method (`super().save()`,
`super(Order, self).save()`: the method of the project base class next in the method resolution order; a
framework's base is not followed), a class's `__init__` when it is called, and a `functools.partial` of any of
these, transitively with cycles cut (`corral.gates.analysis.project` says which calls,
`corral.gates.knowledge.network_reach` walks them). The finding is at the call and names the chain
(`Mailer.send() -> smtplib.SMTP (app/mail.py:14)`). A project Django signal sent inside a scope
(`order_paid.send(...)`, `send_robust`) is followed to the receivers connected to it anywhere in the project
(`corral.gates.knowledge.signals`), for the network calls (CRL401) and the enqueues (CRL402) they make, each
reported once at the send with the receiver in the chain; Django's own signals (`post_save`, sent by the ORM)
are not. A function object handed to `map` or `filter` that is iterated there (`list(map(task.delay, ids))`, a
`for` over it), or to `sorted`/`min`/`max` as `key=`, is called there: reported at it (`analysis/runs_now.py`,
`applied_callables`); handed to anything else (`on_commit`, a thread, a list of callbacks) it runs later. Calls
through objects of unknown type are not followed, and a transaction opened without a `with` (`session.begin()`
as a statement, autobegin, ATOMIC_REQUESTS) is not seen. Functions and lambdas defined but not called, and
callables handed on (`transaction.on_commit(lambda: ...)`), run later: not inside. So does a body the call does
not run (`corral.gates.analysis.runs_now`): an `async def` called without being awaited, gathered by an awaited
`asyncio.gather`/`wait_for`/`shield` or run by `asyncio.run` (a coroutine built inside and gathered after
commit); a generator function whose call is not iterated there (a `for`, a comprehension, `list(...)`,
`next(...)`, `yield from`) or entered as a `with` item (a `@contextmanager` helper entered inside is followed);
a Huey task, whose call enqueues it (a Celery task, Dramatiq actor or RQ `@job` function called directly runs
its body: followed). Of a module-level name two unconditional top-level `def`s/`class`es (or an import then one)
bind, the last is followed; bindings under `if`/`try` after it are each followed.

The prefilter admits a file where a `with` item or a decorator names an opener, one of the names the project
pre-pass gives its wrappers (`transaction_scopes.wrapper_words`, a dependency of every file it rules out) or
a name that an assignment or an import alias of the file binds to one of those, transitively
(`transaction_scopes.may_open_scope`); a file naming an opener only in calls, attributes and imports is not
parsed for it. A name bound in another module by an assignment (`tx = db_transaction` there, imported
here) is not followed, as the pre-pass names a wrapper's re-exports only through `as`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.analysis.modules import ProjectModules
from corral.gates.analysis.names import Scope, lookup_in
from corral.gates.analysis.runs_now import applied_callables, runs_body
from corral.gates.analysis.scoped import ScopedVisitor, lines_mentioning
from corral.gates.analysis.values import StaticValues
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks import call_enqueues, enqueue_of
from corral.gates.knowledge.network import NetworkCall, NetworkCalls
from corral.gates.knowledge.network_reach import JobEnqueue, NetworkReach, Reached, called_in_place
from corral.gates.knowledge.signals import ProjectSignals
from corral.gates.knowledge.transaction_scopes import (
    DJANGO_ATOMIC,
    OPENERS,
    WRAPPER_WORDS,
    Transaction,
    TransactionScopes,
    held_opener_names,
    may_open_scope,
    names_any,
    names_opener,
    own_wrapper_words,
)
from corral.gates.rules.base import Rule
from corral.gates.source.prefilter import Source

ON_COMMIT = "django.db.transaction.on_commit"
PARTIAL = "functools.partial"
DJANGO_ADVICE = "make the call after commit (transaction.on_commit) or outside the transaction"
ADVICE = "make the call outside the transaction, after it commits"
EARLY = "the task can run before the commit"

LocalCallable = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


class NetworkInTransaction(Rule, ScopedVisitor):
    IN_TRANSACTION: ClassVar[str] = "CRL401"
    ENQUEUED_IN_TRANSACTION: ClassVar[str] = "CRL402"
    codes: ClassVar[dict[str, str]] = {
        IN_TRANSACTION: "a network call inside a database transaction",
        ENQUEUED_IN_TRANSACTION: "a job enqueued inside a database transaction",
    }
    # Infra holding a transaction across a network call drains the pool just the same.
    skips_infra = False
    summaries = (WRAPPER_WORDS,)

    VALID = (
        """
        import requests
        from django.db import transaction
        def f(url):
            with transaction.atomic():
                save()
                transaction.on_commit(lambda: requests.post(url, timeout=5))
            requests.post(url, timeout=5)
        """,
        """
        import httpx
        def f(session, url):
            with session.begin():
                def later():
                    return httpx.get(url)
                schedule(later)
        """,
        """
        import functools
        import requests
        from django.db import transaction
        @transaction.atomic
        def f(url):
            transaction.on_commit(functools.partial(requests.post, url))
        """,
        """
        import contextlib
        import requests
        from django.db import transaction
        @contextlib.contextmanager
        def prepared():
            with transaction.atomic():
                prepare()
            yield
        def f(url):
            with prepared():
                requests.post(url, timeout=5)
        """,
        """
        from corral.runtime import Queue, Runtime
        mail = Queue("mail", max_workers=2, timeout=30)
        runtime = Runtime(queues=[mail], store="postgresql://app@db/app")
        async def place(conn, order, mailer):
            async with conn.transaction():
                await runtime.enqueue("mail.receipt", order_id=order.pk, conn=conn)
                mailer.enqueue(order.pk)
        """,
    )
    INVALID = (
        """
        import requests
        from django.db import transaction
        def f(url):
            with transaction.atomic():
                requests.post(url, timeout=5)  # error: 9 CRL401 "requests.post inside transaction.atomic()"
        """,
        """
        from corral.runtime import Queue, Runtime
        mail = Queue("mail", max_workers=2, timeout=30)
        runtime = Runtime(queues=[mail], store="postgresql://app@db/app")
        async def place(conn, order):
            async with conn.transaction():
                await runtime.enqueue("mail.receipt", id=order.pk)  # error: 15 CRL402 "use runtime.enqueue(..., conn"
        """,
        """
        import httpx
        async def f(engine, client: httpx.AsyncClient):
            async with engine.begin() as conn:
                await conn.execute(query)
                await client.get("https://example.com")  # error: 15 CRL401 "httpx.AsyncClient.get inside engine"
        """,
        """
        import smtplib
        from django.db.transaction import atomic
        @atomic
        def f(message):
            with smtplib.SMTP("mail") as smtp:  # error: 10 CRL401 "smtplib.SMTP inside @atomic"
                smtp.send_message(message)  # error: 9 CRL401 "smtplib.SMTP.send_message inside @atomic"
        """,
        """
        import requests
        def f(db, url):
            with db.atomic():
                def notify():
                    requests.post(url)
                notify()  # error: 9 CRL401 "notify() calls requests.post inside db.atomic()"
        """,
        """
        import requests
        from django.db import transaction
        def notify(url):
            requests.post(url, timeout=5)
        @transaction.atomic
        def f(url):
            notify(url)  # error: 5 CRL401 "notify() -> requests.post ("
        """,
        """
        import contextlib
        import requests
        from django.db import transaction
        @contextlib.contextmanager
        def db_transaction():
            with transaction.atomic():
                yield
        def f(url):
            with db_transaction():
                requests.post(url, timeout=5)  # error: 9 CRL401 "requests.post inside db_transaction() ("
        """,
    )

    def __init__(self, context: FileContext) -> None:
        Rule.__init__(self, context)
        names = context.names
        self.network = NetworkCalls(context.tree, names, context.config.extend_network)
        # Outside a transaction only statements that can open one need a visit: they mention an opener or
        # an alias of Django's atomic. Inside one, every statement is visited.
        # The project's transaction wrappers (and the names this file binds to one) open one too.
        values = StaticValues.of(context)
        project_wrappers = values.project.summary(WRAPPER_WORDS)
        own = own_wrapper_words(values.module, project_wrappers, context.text.encode("utf-8", "surrogatepass"))
        wrappers = {*project_wrappers, *own}
        words = {*OPENERS, *wrappers}
        words.update(
            alias
            for scope in (names.root, *names.scopes.values())
            for alias, target in scope.bindings.items()
            if target == DJANGO_ATOMIC or target.rpartition(".")[2] in wrappers
        )
        self.outside_lines = lines_mentioning(context.text, words)
        # `tx = transaction.atomic()` then `with tx:`: the names an opener is assigned to open one too.
        held = held_opener_names(context.text, self.outside_lines, frozenset(words)) - words
        if held:
            words.update(held)
            self.outside_lines = lines_mentioning(context.text, words)
        ScopedVisitor.__init__(self, names, self.outside_lines)
        self.transactions: list[Transaction] = []
        # The methods of the class being visited its decorators run inside a transaction, by name.
        self.methods_opened: dict[str, Transaction] = {}
        # The call of a local function being followed and that function's name (findings go there), and
        # the functions already visited for it: each is visited once per call, however often it is reached.
        self.via: tuple[ast.Call, str] | None = None
        self.followed: set[LocalCallable] = set()
        # Calls written as the argument of on_commit: they run now, not after commit.
        self.eager: set[ast.expr] = set()
        # Why the callable being followed runs now though handed to on_commit (no transaction of its database).
        self.at_once: str | None = None
        self.found: list[Finding] = []

    @cached_property
    def reach(self) -> NetworkReach:
        """What the project functions called inside a transaction reach (other modules read on demand)."""
        return NetworkReach.of_file(self.context, call_enqueues, enqueue_of)

    @cached_property
    def scopes(self) -> TransactionScopes:
        """What opens a transaction here: the APIs and the project's wrappers of them."""
        return TransactionScopes(self.reach.functions)

    @cached_property
    def signals(self) -> ProjectSignals:
        """The project's Django signals and the receivers connected to them (read on the first send)."""
        return ProjectSignals(self.reach.functions)

    @cached_property
    def callables(self) -> dict[Scope, dict[str, list[tuple[LocalCallable, Scope]]]]:
        """The functions and lambdas each function scope defines, by name: called inside a transaction,
        they run there. Module-level ones are left to `ProjectFunctions`, which follows them into other modules."""
        callables: dict[Scope, dict[str, list[tuple[LocalCallable, Scope]]]] = {}
        # The pre-pass met every binding of every function and class body: no walk of the module needed.
        for scope in self.names.scopes.values():
            for name, site in scope.sites:
                if isinstance(site, (ast.FunctionDef, ast.AsyncFunctionDef)) and site.name == name:
                    callables.setdefault(scope, {}).setdefault(name, []).append((site, scope))
                elif (
                    isinstance(site, ast.Assign)
                    and isinstance(site.value, ast.Lambda)
                    and any(isinstance(target, ast.Name) and target.id == name for target in site.targets)
                ):
                    callables.setdefault(scope, {}).setdefault(name, []).append((site.value, scope))
        return callables

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        # A file need not import a network API itself: a project function it calls inside a transaction
        # may. Nor need it name an opener: it may use a project wrapper of one, named in the project's
        # summary. Most files name neither; of those that do, only one whose `with` item or decorator may
        # open a scope is read (`may_open_scope`).
        project = ProjectModules(config.root, source.relpath, source.dependencies, config.whole_tree)
        wrappers = project.summary(WRAPPER_WORDS)
        if not names_opener(source.data) and not names_any(source.data, wrappers):
            return False
        return may_open_scope(source.data, wrappers)

    def check(self) -> Iterator[Finding]:
        self.visit(self.context.tree)
        yield from self.found

    # -- transaction scopes ------------------------------------------------------------------------

    def _opened_by(self, expression: ast.expr, *, decorator: bool) -> Transaction | None:
        module = StaticValues.of(self.context).module
        return self.scopes.opened_by(expression, self.scope, module, decorator=decorator)

    def _run(self, scope: Scope, parts: Sequence[ast.AST], transactions: list[Transaction]) -> None:
        outer = self.transactions, self.lines
        self.transactions = transactions
        self.lines = None if transactions else self.outside_lines
        try:
            self._visit_in_scope(scope, parts)
        finally:
            self.transactions, self.lines = outer

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Decorators and defaults run where the function is defined; its body runs when it is called,
        # inside only the transactions its own decorators open.
        for expression in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        opened = [self._opened_by(decorator, decorator=True) for decorator in node.decorator_list]
        by_class, self.methods_opened = self.methods_opened, {}
        opened.append(by_class.get(node.name))
        try:
            self._run(self.names.scope_of(node), node.body, [scope for scope in opened if scope is not None])
        finally:
            self.methods_opened = by_class

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # `@method_decorator(transaction.atomic, name="dispatch")`: that method's body runs inside.
        module = StaticValues.of(self.context).module
        outer = self.methods_opened, self.lines
        self.methods_opened = self.scopes.methods_opened_by(node, self.scope, module)
        if self.methods_opened:
            self.lines = None
        try:
            super().visit_ClassDef(node)
        finally:
            self.methods_opened, self.lines = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in (*node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        self._run(self.names.expression_scope(node, self.scope), [node.body], [])

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        transactions = self.transactions
        for item in node.items:
            # Each item is entered inside the transactions the items before it opened.
            self._run(self.scope, [item.context_expr], transactions)
            if item.optional_vars is not None:
                self._run(self.scope, [item.optional_vars], transactions)
            opened = self._opened_by(item.context_expr, decorator=False)
            if opened is not None:
                transactions = [*transactions, opened]
        self._run(self.scope, node.body, transactions)

    def visit_With(self, node: ast.With) -> None:
        self._visit_with(node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self._visit_with(node)

    # -- calls inside them -------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        if self.transactions:
            # An enqueue is CRL402's, even when it is also a network call (a broker client in extend-network).
            module = StaticValues.of(self.context).module
            enqueue = enqueue_of(node, self.scope, module, self.reach.functions)
            found = None
            if enqueue is None:
                found = self.network.classify(node, self.scope) or self.reach.held_call(node, self.scope, module)
            if enqueue is not None:
                self._report_enqueue(enqueue)
            elif found is not None:
                self._report(found)
            elif self.resolve(node.func) == ON_COMMIT:
                arguments = (*node.args, *(keyword.value for keyword in node.keywords))
                self.eager.update(argument for argument in arguments if isinstance(argument, ast.Call))
                self._run_at_once(node)
            elif not self._follow_signal(node):
                self._follow(node)
            # A function handed to `map` and iterated here, or a `key=`, is called here.
            for applied in applied_callables(node, self.scope, module):
                self.visit_Call(called_in_place(applied))
        self.generic_visit(node)

    def _follow(self, call: ast.Call) -> None:
        """Visit the body of a local function or lambda `call` runs, as if it were written here."""
        func = call.func
        targets: list[tuple[LocalCallable, Scope]]
        if isinstance(func, ast.Lambda):
            targets = [(func, self.scope)]
        elif isinstance(func, ast.Name):
            targets = lookup_in(self.callables, func.id, self.scope)
        else:
            targets = []
        if not targets:
            self._follow_project(call)
            return
        module = StaticValues.of(self.context).module
        # A local coroutine not awaited or generator not iterated runs later, if ever.
        targets = [
            (target, defined_in)
            for target, defined_in in targets
            if isinstance(target, ast.Lambda) or runs_body(call, target, self.scope, module)
        ]
        outer = self.via, self.followed
        if self.via is None and isinstance(func, ast.Name):
            self.via, self.followed = (call, func.id), set()
        try:
            for target, defined_in in targets:
                if target in self.followed:
                    continue
                self.followed.add(target)
                if isinstance(target, ast.Lambda):
                    self._visit_in_scope(self.names.expression_scope(target, defined_in), [target.body])
                else:
                    self._visit_in_scope(self.names.scope_of(target), target.body)
        finally:
            self.via, self.followed = outer

    def _waits_for_commit(self, using: str | None, written: str | None = None) -> str | None:
        """None when Django's `on_commit(..., using=<using>)` waits for a commit here (a Django transaction of that
        database is open), else why it runs its callable at once; `written`: its `using=` as the call spells it
        (`'default'` and `None` are the default database, `using` None)."""
        django = [transaction for transaction in self.transactions if transaction.django]
        if any(transaction.alias == using for transaction in django):
            return None
        if not django:
            return "on_commit runs at once: Django has no transaction open (this one is not Django's)"
        if using is None:
            passed = "without using=" if written is None else f"with using={written}, not "
            return f"on_commit {passed}{django[-1].alias} runs at once: the default database has no transaction open"
        return f"on_commit(using={using}) runs at once: that database has no transaction open"

    def _deferred(self, enqueue: JobEnqueue) -> bool:
        """Whether `enqueue` is part of the open transaction or waits for its commit: not CRL402."""
        django = any(transaction.django for transaction in self.transactions)
        if django and enqueue.through_django:
            return True  # the job is written in this very transaction
        return enqueue.after_default_commit and self._waits_for_commit(None) is None

    def _run_at_once(self, call: ast.Call) -> None:
        """Follow the callable handed to `on_commit` as called here when no transaction of its database is open."""
        using_keyword = next((keyword.value for keyword in call.keywords if keyword.arg == "using"), None)
        written = None if using_keyword is None else ast.unparse(using_keyword)
        using = None if written in ("'default'", "None") else written
        reason = self._waits_for_commit(using, written)
        handed = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "func"), None)
        if reason is None or handed is None:
            return
        if isinstance(handed, ast.Call) and self.resolve(handed.func) == PARTIAL and handed.args:
            # `partial(task.delay, 1)` runs as `task.delay(1)`.
            now = ast.Call(func=handed.args[0], args=handed.args[1:], keywords=handed.keywords)
        elif isinstance(handed, (ast.Name, ast.Attribute, ast.Lambda)):
            now = ast.Call(func=handed, args=[], keywords=[])
        else:
            return
        outer = self.at_once
        self.at_once = reason
        try:
            self.visit_Call(ast.copy_location(now, handed))
        finally:
            self.at_once = outer

    def _follow_signal(self, call: ast.Call) -> bool:
        """Whether `call` sends a project signal; reported when a receiver it runs makes a network call (CRL401)
        or enqueues a job (CRL402), once each."""
        module = StaticValues.of(self.context).module
        signal = self.signals.sent(call, self.scope, module)
        if signal is None:
            return False
        assert isinstance(call.func, ast.Attribute)
        network_reported = enqueue_reported = False
        for receiver in self.signals.receivers(call, signal, self.scope, module):
            sent = f"{ast.unparse(call.func)}() -> {receiver.callee.shown}() (receiver, {receiver.where})"
            reached = self.reach.of(receiver.callee)
            if reached is not None and not network_reported:
                network_reported = True
                self._report_reached(call, reached, sent)
            enqueued = next(
                (use for use in self.reach.enqueued(receiver.callee) if not self._deferred(use.enqueue)), None
            )
            if enqueued is not None and not enqueue_reported:
                enqueue_reported = True
                rest = enqueued.reached(receiver.callee)
                self._report_enqueue(enqueued.enqueue, (call, f"{sent} -> {rest._replace(hops=rest.hops[1:]).chain()}"))
        return True

    def _follow_project(self, call: ast.Call) -> None:
        """Report `call` when a project function it runs makes a network call, and when one enqueues a job that
        is not part of this transaction, naming the chain."""
        module = StaticValues.of(self.context).module
        callees = self.reach.runs(call, self.scope, module)
        reached = next((found for callee in callees if (found := self.reach.of(callee)) is not None), None)
        if reached is not None:
            self._report_reached(call, reached)
        enqueued = next(
            (
                (use.enqueue, use.reached(callee))
                for callee in callees
                for use in self.reach.enqueued(callee)
                if not self._deferred(use.enqueue)
            ),
            None,
        )
        if enqueued is not None:
            self._report_enqueue(enqueued[0], (call, enqueued[1].chain()))

    def _report_reached(self, call: ast.Call, reached: Reached, sent: str | None = None) -> None:
        """CRL401 at `call`, which runs a project function that reaches a network call; `sent`: the signal sent and
        the receiver that function is."""
        transaction = self.transactions[-1]
        advice = DJANGO_ADVICE if transaction.django else ADVICE
        node = call
        chain = reached.chain() if sent is None else f"{sent} -> {reached._replace(hops=reached.hops[1:]).chain()}"
        if self.via is not None:
            node, callee = self.via
            chain = f"{callee}() -> {chain}"
        message = f"{chain} inside {transaction.shown}; {advice}"
        self.found.append(self.context.finding(node, self.IN_TRANSACTION, message))

    def _report_enqueue(self, enqueue: JobEnqueue, reached: tuple[ast.Call, str] | None = None) -> None:
        """CRL402 for `enqueue`, made here or (`reached`: the call here and the chain as shown) by a project
        function that call runs."""
        transaction = self.transactions[-1]
        if self._deferred(enqueue):
            return
        node: ast.AST = enqueue.call
        if reached is not None:
            node, shown = reached
        else:
            shown = enqueue.api
        if self.via is not None:
            node, callee = self.via
            shown = f"{callee}() -> {shown}" if reached is not None else f"{callee}() calls {shown}"
        elif reached is None and enqueue.call in self.eager:
            message = (
                f"{shown} runs now, inside {transaction.shown}, not after commit; "
                "pass on_commit a callable (lambda: ... or functools.partial(...))"
            )
            self.found.append(self.context.finding(node, self.ENQUEUED_IN_TRANSACTION, message))
            return
        if transaction.alias is not None:
            # Celery's *_on_commit forms wait for the default database only.
            options = [f"transaction.on_commit(..., using={transaction.alias})"]
        elif transaction.django:
            options = [f"{enqueue.on_commit}(...)"] if enqueue.on_commit is not None else []
            options += ["transaction.on_commit(...)"]
        else:
            options = []
        options += [enqueue.in_transaction] if enqueue.in_transaction is not None else []
        if options:
            advice = f"use {', '.join(options[:-1])} or {options[-1]}" if len(options) > 1 else f"use {options[0]}"
        else:
            advice = "enqueue it after the transaction commits"
        early = self.at_once or (self._waits_for_commit(None) if enqueue.after_default_commit else None) or EARLY
        message = f"{shown} inside {transaction.shown}; {early}: {advice}"
        self.found.append(self.context.finding(node, self.ENQUEUED_IN_TRANSACTION, message))

    def _report(self, found: NetworkCall) -> None:
        transaction = self.transactions[-1]
        advice = DJANGO_ADVICE if transaction.django else ADVICE
        if self.via is not None:
            node, callee = self.via
            message = f"{callee}() calls {found.shown} inside {transaction.shown}; {advice}"
        elif found.call in self.eager:
            node = found.call
            message = (
                f"{found.shown} runs now, inside {transaction.shown}, not after commit; "
                "pass on_commit a callable (lambda: ... or functools.partial(...))"
            )
        else:
            node = found.call
            reason = f"{self.at_once}; " if self.at_once is not None else ""
            message = f"{found.shown} inside {transaction.shown}; {reason}{advice}"
        self.found.append(self.context.finding(node, self.IN_TRANSACTION, message))
