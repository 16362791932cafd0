"""What counts as a network call: the table of network APIs, and which local names hold client objects.

One module for every rule that asks "does this call talk to a remote end?" (CRL4: not inside a transaction;
CRL2: not without a timeout inside a job). Two kinds of knowledge live here:

- `CALLS`: functions whose call is itself the network use (`requests.post`, `urllib.request.urlopen`,
  `socket.create_connection`) and constructors that connect or stand for a connection (`smtplib.SMTP`,
  `http.client.HTTPConnection`), and Django's mail functions (`send_mail`, `mail_admins`, ...); also called
  through a name bound once to a `functools.partial` of one (`get = partial(requests.get, timeout=5)`,
  where the call's own timeout wins over the partial's);
- `CLIENTS`: constructors of client objects whose methods talk to the network (`requests.Session`,
  `httpx.AsyncClient`, `aiohttp.ClientSession`, `urllib3.PoolManager`, ...), Django's `EmailMessage` and
  `EmailMultiAlternatives` (their `send()`) and mail connections (`get_connection().send_messages(...)`).

A project adds its own APIs with the `extend-network` setting (`NetworkCalls(..., configured)`): a call of
a named function is a network call, and what it returns is a client whose every method call is one.

`NetworkCalls` indexes, once per module and on first need, the names each scope binds to client objects: by construction
(`s = requests.Session()`, `with httpx.Client() as c`, `(c := ...)`) or by annotation (a parameter or a
variable annotated `httpx.AsyncClient`, `Optional[...]`, `"..."`), walking the module with the scopes of
`corral.gates.analysis.names` and reading the index through its lexical rule (`lookup_in`). Like the
names, the index is flow-insensitive within a scope: a name bound to a client anywhere in a scope is a
client throughout, so rebinding cannot hide one.

Clients held as attributes are known the same way, through the class of the method they are used in:
`self.http` is a client when the class's methods assign one to it (`self.http = httpx.Client(timeout=5)`,
or an annotation `self.http: httpx.Client = ...`), or its body binds or annotates one (a class attribute
`http = requests.Session()`, a dataclass or attrs field `http: httpx.Client`). Only the class's own body
and methods count: an attribute a base class assigns, or one of an object other than `self`/`cls`, is not
tracked here (`corral.gates.analysis.project` follows calls to project classes' methods instead). A client
another project module binds at module level is found by `knowledge.network_reach` (`HeldElsewhere`), through
`client_method_call`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cached_property
from typing import NamedTuple

from corral.gates.analysis.modules import ModuleInfo
from corral.gates.analysis.names import AttributeSite, ModuleNames, Scope, arguments_of, lookup_in
from corral.gates.analysis.scoped import scoped_nodes
from corral.gates.source.prefilter import RELATIVE_IMPORT, WORD, Lines, Source, starts_word


class Api(NamedTuple):
    """A network function: its library, and where a positional timeout goes (None: keyword only)."""

    library: str
    timeout_position: int | None = None


class ClientKind(NamedTuple):
    """A kind of client object: its canonical type name, its library, the methods that talk to the network
    (`every_method`: all of them, for a client a configured `extend-network` API returns)."""

    name: str
    library: str
    methods: frozenset[str]
    every_method: bool = False


class HeldElsewhere(NamedTuple):
    """A client another project module binds at module level (`sess = requests.Session()` in
    `app/clients.py`): its dotted name, that module, and the call constructing it (None: only annotated)."""

    dotted: str
    module: ModuleInfo
    construction: ast.Call | None

    def shown(self) -> str:
        line = self.construction.lineno if self.construction is not None else 1
        return f"client {self.dotted} built at {self.module.relpath}:{line}"


class NetworkCall(NamedTuple):
    """One call that talks to the network. `api` is the dotted name shown to users (`requests.post`,
    `httpx.AsyncClient.get`); `timeout` is the expression given as its timeout (keyword or positional), if any;
    `held`: the client of another module the call is made through, if it is one."""

    library: str
    api: str
    call: ast.Call
    timeout: ast.expr | None
    held: HeldElsewhere | None = None

    @property
    def shown(self) -> str:
        """The API as a message names it: with the module-level client of another module it goes through."""
        return self.api if self.held is None else f"{self.api} ({self.held.shown()})"


_VERBS = ("get", "post", "put", "patch", "delete", "head", "options", "request")
PARTIALS = frozenset({"functools.partial"})
DJANGO_MAIL = "django.core.mail"
# The library of the APIs a project names in `extend-network`: no default timeout is known for them.
CONFIGURED = "extend-network"

CALLS: dict[str, Api] = {
    **{f"requests.{verb}": Api("requests") for verb in _VERBS},
    **{f"requests.api.{verb}": Api("requests") for verb in _VERBS},
    **{f"httpx.{verb}": Api("httpx") for verb in (*_VERBS, "stream")},
    "aiohttp.request": Api("aiohttp"),
    "aiohttp.client.request": Api("aiohttp"),
    "urllib.request.urlopen": Api("urllib", 2),
    "urllib.request.urlretrieve": Api("urllib"),
    "urllib3.request": Api("urllib3"),
    "socket.create_connection": Api("socket", 1),
    # An HTTP connection object stands for the connection: building one inside a scope is the network use.
    "http.client.HTTPConnection": Api("http.client", 2),
    "http.client.HTTPSConnection": Api("http.client", 2),
    # With a host, the SMTP constructors connect at once.
    "smtplib.SMTP": Api("smtplib", 3),
    "smtplib.SMTP_SSL": Api("smtplib"),
    "smtplib.LMTP": Api("smtplib", 4),
    # Django's mail functions open an SMTP connection through the configured backend.
    **{
        f"{module}.{function}": Api(DJANGO_MAIL)
        for module in ("django.core.mail",)
        for function in ("send_mail", "send_mass_mail", "mail_admins", "mail_managers")
    },
}

_REQUESTS_SESSION = ClientKind("requests.Session", "requests", frozenset({*_VERBS, "send"}))
_HTTPX_METHODS = frozenset({*_VERBS, "stream", "send"})
_HTTPX_CLIENT = ClientKind("httpx.Client", "httpx", _HTTPX_METHODS)
_HTTPX_ASYNC_CLIENT = ClientKind("httpx.AsyncClient", "httpx", _HTTPX_METHODS)
_AIOHTTP_SESSION = ClientKind("aiohttp.ClientSession", "aiohttp", frozenset({*_VERBS, "ws_connect"}))
_URLLIB3_METHODS = frozenset({"request", "urlopen", "request_encode_url", "request_encode_body"})
_URLLIB3_POOL_MANAGER = ClientKind("urllib3.PoolManager", "urllib3", _URLLIB3_METHODS)
_URLLIB3_CONNECTION_POOL = ClientKind("urllib3.HTTPConnectionPool", "urllib3", _URLLIB3_METHODS)
_HTTP_CONNECTION = ClientKind(
    "http.client.HTTPConnection", "http.client", frozenset({"request", "connect", "send", "endheaders", "getresponse"})
)
_SMTP = ClientKind(
    "smtplib.SMTP",
    "smtplib",
    frozenset(
        {"connect", "sendmail", "send_message", "login", "starttls", "ehlo", "helo", "ehlo_or_helo_if_needed"}
        | {"noop", "mail", "rcpt", "data", "verify", "docmd", "quit"}
    ),
)

# A Django e-mail sends through a connection of the configured backend (SMTP by default) when sent; the
# connection itself opens one when opened or when it sends.
_DJANGO_EMAIL = ClientKind("django.core.mail.EmailMessage", DJANGO_MAIL, frozenset({"send"}))
_DJANGO_MAIL_CONNECTION = ClientKind(
    "django.core.mail.get_connection", DJANGO_MAIL, frozenset({"send_messages", "open"})
)

# Constructors and factories of client objects, by every name they are importable as; the same names
# serve as types in annotations.
CLIENTS: dict[str, ClientKind] = {
    "requests.Session": _REQUESTS_SESSION,
    "requests.sessions.Session": _REQUESTS_SESSION,
    "requests.session": _REQUESTS_SESSION,
    "requests.sessions.session": _REQUESTS_SESSION,
    "httpx.Client": _HTTPX_CLIENT,
    "httpx.AsyncClient": _HTTPX_ASYNC_CLIENT,
    "aiohttp.ClientSession": _AIOHTTP_SESSION,
    "aiohttp.client.ClientSession": _AIOHTTP_SESSION,
    "urllib3.PoolManager": _URLLIB3_POOL_MANAGER,
    "urllib3.ProxyManager": _URLLIB3_POOL_MANAGER,
    "urllib3.poolmanager.PoolManager": _URLLIB3_POOL_MANAGER,
    "urllib3.poolmanager.ProxyManager": _URLLIB3_POOL_MANAGER,
    "urllib3.HTTPConnectionPool": _URLLIB3_CONNECTION_POOL,
    "urllib3.HTTPSConnectionPool": _URLLIB3_CONNECTION_POOL,
    "urllib3.connectionpool.HTTPConnectionPool": _URLLIB3_CONNECTION_POOL,
    "urllib3.connectionpool.HTTPSConnectionPool": _URLLIB3_CONNECTION_POOL,
    "urllib3.connection_from_url": _URLLIB3_CONNECTION_POOL,
    "urllib3.connectionpool.connection_from_url": _URLLIB3_CONNECTION_POOL,
    "http.client.HTTPConnection": _HTTP_CONNECTION,
    "http.client.HTTPSConnection": _HTTP_CONNECTION,
    "smtplib.SMTP": _SMTP,
    "smtplib.SMTP_SSL": _SMTP,
    "smtplib.LMTP": _SMTP,
    **{
        f"{module}.{name}": _DJANGO_EMAIL
        for module in ("django.core.mail", "django.core.mail.message")
        for name in ("EmailMessage", "EmailMultiAlternatives")
    },
    "django.core.mail.get_connection": _DJANGO_MAIL_CONNECTION,
    "django.core.mail.backends.smtp.EmailBackend": _DJANGO_MAIL_CONNECTION,
}

# A name resolves to one of the APIs above only through an import that names its top-level module
# (`import requests`, `import os, httpx`, `from urllib import request`, `from http.client import ...`), or
# through a relative import, which reaches them only from a network library's own code (or from a file
# whose relative imports climb out of every package).
NETWORK_PACKAGES = frozenset(name.partition(".")[0] for name in (*CALLS, *CLIENTS))
# The fewest words one of which every package name holds (`http` stands for `httpx` too).
_PACKAGE_WORDS = tuple(
    sorted(
        package.encode()
        for package in NETWORK_PACKAGES
        if not any(other != package and other in package for other in NETWORK_PACKAGES)
    )
)
_NETWORK_PACKAGE_NAMES = frozenset(package.encode() for package in NETWORK_PACKAGES)
# Import statements: each pattern starts with its literal keyword, so the regex engine can skip ahead.
_IMPORT_KEYWORD = re.compile(rb"import(?![\w\x80-\xff])")
_FROM_KEYWORD = re.compile(rb"from(?![\w\x80-\xff])")
_IMPORT_WORD = re.compile(rb"(?<![\w.\x80-\xff])import(?![\w\x80-\xff])")
_AS_WORD = re.compile(rb"(?<![\w.\x80-\xff])as(?![\w\x80-\xff])")
_COMMENT = re.compile(rb"#[^\r\n]*")
_BREAKS = re.compile(rb"\\(?:\r\n|\r|\n)|[()]")
# `urllib` and `http` hold more than network code: `urllib.parse` and `http.HTTPStatus` talk to nobody.
_NEEDS_SUBMODULE = {b"urllib": b"request", b"http": b"client", b"django": b"core.mail"}
# Every word a relative import of a network API can name: one that climbs out of every package names the
# network package itself.
_RELATIVE_WORDS = frozenset(part.encode() for name in (*CALLS, *CLIENTS) for part in name.split("."))


def might_call_network(source: Source) -> bool:
    """False only when no call in the file can resolve to a network API: a sound prefilter for rules."""
    return (source.imports_any(*_PACKAGE_WORDS) and _imports_network_package(source.data)) or _relative_may_reach(
        source
    )


def _imports_network_package(data: bytes) -> bool:
    """Whether an import statement binds a name through which a network API resolves. Each statement is
    read whole (every module of `import a, b.c as d`, the names of `from urllib import (...)`)."""
    lines = Lines(data)
    for keyword, pattern in ((b"import", _IMPORT_KEYWORD), (b"from", _FROM_KEYWORD)):
        for match in pattern.finditer(data):
            if not starts_word(data, match.start()):
                continue
            statement = lines.rest(match.end())
            if statement is None:
                return True
            # Import statements hold no strings: a `#` starts a comment, a `;` ends the statement.
            statement = _BREAKS.sub(b" ", _COMMENT.sub(b" ", statement)).split(b";", 1)[0]
            if keyword == b"import":
                if any(_module_reaches_network(*_dotted(item)) for item in statement.split(b",")):
                    return True
            else:
                module, *names = _IMPORT_WORD.split(statement, 1)
                if _from_reaches_network(b"".join(module.split()), names[0] if names else b""):
                    return True
    return False


def _dotted(item: bytes) -> tuple[bytes, bool]:
    """The dotted module an `import` item names (spaces around its dots removed), and whether it is
    bound to an alias."""
    parts = _AS_WORD.split(item, 1)
    return b"".join(parts[0].split()), len(parts) > 1


def _module_reaches_network(module: bytes, aliased: bool) -> bool:
    package, _, rest = module.partition(b".")
    if package not in _NETWORK_PACKAGE_NAMES:
        return False
    needed = _NEEDS_SUBMODULE.get(package)
    # `import urllib.parse` binds `urllib`, whose every submodule is then in reach; bound to an alias, it
    # reaches what it names.
    return needed is None or not aliased or not rest or rest.startswith(needed)


def _from_reaches_network(module: bytes, names: bytes) -> bool:
    package, _, rest = module.partition(b".")
    if package not in _NETWORK_PACKAGE_NAMES:
        return False
    needed = _NEEDS_SUBMODULE.get(package)
    if needed is None or rest.startswith(needed):
        return True
    # `from urllib import request`, `from django.core import mail` name the submodule (or `*` brings it).
    head = rest + b"." if rest else b""
    if not needed.startswith(head):
        return False
    step = needed[len(head) :].partition(b".")[0]
    return step in names or b"*" in names


def _relative_may_reach(source: Source) -> bool:
    """Whether a relative import of the file can resolve into a network package: the file is inside one,
    or the import climbs above the top of the file's own package (as `names.py` resolves it)."""
    parts = source.package
    inside = not parts or parts[0] in NETWORK_PACKAGES
    data = source.data
    lines = Lines(data)
    for match in RELATIVE_IMPORT.finditer(data):
        if not starts_word(data, match.start()):
            continue
        if not inside and match.group(1).count(b".") - 1 < len(parts):
            continue
        statement = lines.rest(match.end())
        if statement is None or not _RELATIVE_WORDS.isdisjoint(WORD.findall(statement)):
            return True
    return False


# A client an attribute holds: its kind, the call constructing it (None: an annotation), the binding's scope.
_HeldClient = tuple[ClientKind, ast.Call | None, Scope]

# Every dotted name a client class can be reached through (`httpx`, `httpx.Client`, `http.client`, ...).
_CLIENT_PREFIXES = frozenset(
    ".".join(name.split(".")[:cut]) for name in CLIENTS for cut in range(1, name.count(".") + 2)
)


class NetworkCalls:
    """Classifies calls of one module: `classify(call, scope)` says whether a call talks to the network.

    `configured`: the dotted names of `extend-network`; a call of one is a network call (its timeout is its
    `timeout=` keyword, if any), and what it returns is a client whose every method call is one."""

    def __init__(self, tree: ast.Module, names: ModuleNames, configured: tuple[str, ...] = ()) -> None:
        self.names = names
        self.tree = tree
        self.configured = frozenset(configured)
        self._prefixes = _CLIENT_PREFIXES | {
            ".".join(name.split(".")[:cut]) for name in configured for cut in range(1, name.count(".") + 2)
        }
        self._attributes: dict[tuple[Scope, str], list[_HeldClient]] = {}

    @cached_property
    def clients(self) -> dict[Scope, dict[str, list[ClientKind]]]:
        """The names each scope binds to client objects; built on first need, since most calls a rule
        classifies are settled by their resolved name alone."""
        clients: dict[Scope, dict[str, list[ClientKind]]] = {}
        # Walking the module is only worth it where a name is bound to a client class or its module.
        scopes = (self.names.root, *self.names.scopes.values())
        if not any(target in self._prefixes for scope in scopes for target in scope.bindings.values()):
            return clients
        for node, scope in scoped_nodes(self.tree, self.names):
            for name, bound_in, kind in self._bindings(node, scope):
                if kind is None:
                    continue
                kinds = clients.setdefault(bound_in.home(name), {}).setdefault(name, [])
                if kind not in kinds:
                    kinds.append(kind)
        return clients

    @cached_property
    def calls_bound(self) -> dict[Scope, dict[str, list[ast.Call]]]:
        """The calls each scope binds names to (`c = make_client(timeout=5)`, `with httpx.Client() as c`),
        in source order: where a client method's timeout comes from when the call gives none."""
        bound: dict[Scope, dict[str, list[ast.Call]]] = {}
        for node, scope in scoped_nodes(self.tree, self.names):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        bound.setdefault(scope.home(target.id), {}).setdefault(target.id, []).append(node.value)
            elif (
                isinstance(node, ast.withitem)
                and isinstance(node.context_expr, ast.Call)
                and isinstance(node.optional_vars, ast.Name)
            ):
                name = node.optional_vars.id
                bound.setdefault(scope.home(name), {}).setdefault(name, []).append(node.context_expr)
        return bound

    def construction(self, name: str, scope: Scope) -> ast.Call | None:
        """The first call `scope` itself binds `name` to (enclosing scopes are not consulted), or None."""
        calls = self.calls_bound.get(scope, {}).get(name)
        return calls[0] if calls else None

    def classify(self, call: ast.Call, scope: Scope) -> NetworkCall | None:
        """The network call `call` is, seen from `scope`, or None when it is not one the gate knows."""
        func = call.func
        name = self.names.resolve(func, scope)
        api = CALLS.get(name) if name is not None else None
        if name is not None and api is not None:
            return NetworkCall(api.library, name, call, _timeout(call, api.timeout_position))
        if name in self.configured:
            return NetworkCall(CONFIGURED, name, call, _timeout(call, None))
        if isinstance(func, ast.Name):
            through = self._partial_of_api(func.id, scope, call)
            if through is not None:
                return through
        if isinstance(func, ast.Attribute):
            return client_method_call(call, self.client_kinds(func.value, scope))
        return None

    def _partial_of_api(self, name: str, scope: Scope, call: ast.Call) -> NetworkCall | None:
        """`get = functools.partial(requests.get, timeout=5)` then `get(url)`: the API's call, its timeout
        the call's own (which wins), else the one the partial gives. Only for a name bound once, to that."""
        binder = scope.binder(name)
        sites = binder.sites_of(name) if binder is not None else []
        # Read the one binding site itself: indexing every call the module binds (`calls_bound`) for each
        # plain-name call a rule classifies cost a walk of every module the call following reaches.
        site = sites[0] if len(sites) == 1 else None
        if binder is None or not isinstance(site, ast.Assign) or not isinstance(site.value, ast.Call):
            return None
        if not any(isinstance(target, ast.Name) and target.id == name for target in site.targets):
            return None  # `get, post = partial(...)` unpacks what the call returns
        partial = site.value
        if not partial.args or self.names.resolve(partial.func, binder) not in PARTIALS:
            return None
        wrapped = self.names.resolve(partial.args[0], binder)
        api = CALLS.get(wrapped) if wrapped is not None else None
        if wrapped is None or api is None:
            return None
        given = len(partial.args) - 1
        position = api.timeout_position
        timeout = _timeout(call, None if position is None or position < given else position - given)
        if timeout is None:
            timeout = _timeout(partial, None if position is None else position + 1)
        return NetworkCall(api.library, wrapped, call, timeout)

    def client_kinds(self, node: ast.expr, scope: Scope) -> list[ClientKind]:
        """The kinds of client `node` may be: a name bound to one, an attribute of `self` the class binds
        to one, or a client constructed in place."""
        if isinstance(node, ast.Name):
            return lookup_in(self.clients, node.id, scope)
        if isinstance(node, ast.Attribute):
            return list(dict.fromkeys(kind for kind, _, _ in self._attribute_clients(node, scope)))
        kind = self._constructed(node, scope)
        return [kind] if kind is not None else []

    def attribute_construction(self, node: ast.Attribute, scope: Scope) -> tuple[ast.Call, Scope] | None:
        """The first construction (in source order) of the client `self.<name>` holds, and the scope it is
        made in (where its timeout is read); None when the class only annotates it, or it is no client."""
        return next(((made, where) for _, made, where in self._attribute_clients(node, scope) if made), None)

    def _attribute_clients(self, node: ast.Attribute, scope: Scope) -> list[_HeldClient]:
        """The clients the class binds `self.<name>` to, in source order, each with the call constructing
        it (None for an annotation) and the scope of that binding."""
        cls = self.names.instance_class(node.value, scope)
        if cls is None:
            return []
        key = (cls, node.attr)
        known = self._attributes.get(key)
        if known is None:
            found: list[tuple[int, _HeldClient]] = []
            sites = [
                *self.names.instance_attributes(cls).get(node.attr, []),
                *(
                    AttributeSite(site.value, site.annotation if isinstance(site, ast.AnnAssign) else None, cls)
                    for site in cls.sites_of(node.attr)
                    if isinstance(site, (ast.Assign, ast.AnnAssign))
                ),
            ]
            declared = self.names.class_annotations.get(cls, {}).get(node.attr)
            if declared is not None:
                sites.append(AttributeSite(None, declared.annotation, cls))
            for site in sites:
                made = site.value if isinstance(site.value, ast.Call) else None
                kind = self._constructed(made, site.scope) if made is not None else None
                if made is not None and kind is not None:
                    found.append((made.lineno, (kind, made, site.scope)))
                kind = self._annotated(site.annotation, site.scope) if site.annotation is not None else None
                if site.annotation is not None and kind is not None:
                    found.append((site.annotation.lineno, (kind, None, site.scope)))
            known = self._attributes[key] = [held for _, held in sorted(found, key=_first)]
        return known

    # -- the index -----------------------------------------------------------------------------

    def _bindings(self, node: ast.AST, scope: Scope) -> Iterator[tuple[str, Scope, ClientKind | None]]:
        """The names `node` (seen in `scope`) binds: (name, the scope it binds in, the client kind or None)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = self.names.scope_of(node)
            for argument in arguments_of(node.args):
                # Annotations are read where the function is defined.
                if argument.annotation is not None:
                    yield argument.arg, inner, self._annotated(argument.annotation, scope)
        elif isinstance(node, ast.Assign):
            kind = self._constructed(node.value, scope)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, scope, kind
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, scope, self._annotated(node.annotation, scope)
            if node.value is not None:
                yield node.target.id, scope, self._constructed(node.value, scope)
        elif isinstance(node, ast.NamedExpr):
            yield node.target.id, scope, self._constructed(node.value, scope)
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            yield node.optional_vars.id, scope, self._constructed(node.context_expr, scope)

    def _constructed(self, value: ast.expr, scope: Scope) -> ClientKind | None:
        if not isinstance(value, ast.Call):
            return None
        name = self.names.resolve(value.func, scope)
        if name in self.configured:
            return ClientKind(name, CONFIGURED, frozenset(), every_method=True)
        return CLIENTS.get(name) if name is not None else None

    def _annotated(self, annotation: ast.expr, scope: Scope) -> ClientKind | None:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                return None
        # `Optional[httpx.Client]`, `httpx.Client | None`, `Annotated[httpx.Client, ...]` all name the type.
        for node in ast.walk(annotation):
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = self.names.resolve(node, scope)
                kind = CLIENTS.get(name) if name is not None else None
                if kind is not None:
                    return kind
        return None


def client_method_call(
    call: ast.Call, kinds: list[ClientKind], held: HeldElsewhere | None = None
) -> NetworkCall | None:
    """`call` (`<client>.<method>(...)`) as a network call when its method talks to the network on a client of
    one of `kinds`; `held`: the module-level client of another module it is called on."""
    assert isinstance(call.func, ast.Attribute)
    method = call.func.attr
    for kind in kinds:
        if kind.every_method or method in kind.methods:
            return NetworkCall(kind.library, f"{kind.name}.{method}", call, _timeout(call, None), held)
    return None


# Every method name some client kind makes a network call with: a call by any other name needs no look at the
# module its receiver comes from.
CLIENT_METHODS = frozenset(method for kind in CLIENTS.values() for method in kind.methods)


def _first(found: tuple[int, _HeldClient]) -> int:
    return found[0]


def _timeout(call: ast.Call, position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "timeout":
            return keyword.value
    if position is None or len(call.args) <= position:
        return None
    # After a `*args` the positions of the arguments are unknown.
    if any(isinstance(argument, ast.Starred) for argument in call.args[: position + 1]):
        return None
    return call.args[position]
