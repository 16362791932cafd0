"""The one scope model (`corral.gates.analysis.names.Scope`): every name a walk meets, resolved as Python binds it."""

from __future__ import annotations

import ast
import textwrap

from corral.gates.analysis.names import FACTORIES, LOCAL, LOOP, LOOP_TYPES, ModuleNames, Scope, lookup_in
from corral.gates.analysis.scoped import ScopedVisitor, scoped_nodes
from corral.gates.knowledge.network import NetworkCalls


class _Resolutions(ScopedVisitor):
    """Every `Name` a full walk loads, with what it resolves to and the scope it was read in."""

    def __init__(self, tree: ast.Module) -> None:
        super().__init__(ModuleNames(tree, "app.module"))
        self.tree = tree
        self.found: list[tuple[int, str, str | None]] = []
        self.scopes: dict[tuple[int, str], Scope] = {}

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.found.append((node.lineno, node.id, self.resolve(node)))
            self.scopes[(node.lineno, node.id)] = self.scope


def _resolve(source: str) -> tuple[list[tuple[int, str, str | None]], _Resolutions]:
    tree = ast.parse(textwrap.dedent(source))
    walker = _Resolutions(tree)
    walker.visit(tree)
    return walker.found, walker


def test_class_bodies_are_invisible_from_nested_functions_lambdas_and_comprehensions() -> None:
    found, _ = _resolve(
        """
        import asyncio
        class C:
            spawn = asyncio.create_task
            direct = spawn
            def method(self):
                return spawn
            later = lambda: spawn
            listed = [spawn for _ in range(2)]
            first = [x for x in spawn]
        """
    )
    assert [(line, resolved) for line, name, resolved in found if name == "spawn"] == [
        (5, "asyncio.create_task"),
        (7, None),
        (8, None),
        (9, None),
        # A comprehension's first iterable is evaluated in the class body.
        (10, "asyncio.create_task"),
    ]


def test_global_and_nonlocal_bindings_land_where_python_puts_them() -> None:
    found, _ = _resolve(
        """
        import asyncio
        loop = None
        def start():
            global loop
            loop = asyncio.get_event_loop()
        def use():
            return loop
        def outer():
            spawn = None
            def inner():
                nonlocal spawn
                spawn = asyncio.create_task
            def reader():
                return spawn
        """
    )
    assert (8, "loop", "<loop>") in found
    assert (15, "spawn", "asyncio.create_task") in found


def test_comprehension_and_lambda_targets_shadow_outer_names() -> None:
    found, walker = _resolve(
        """
        import asyncio
        from dataclasses import field
        names = [field.name for field in fields]
        tasks = [asyncio for asyncio in loops]
        call = lambda asyncio: asyncio
        type_names = {type: type for type in kinds}
        """
    )
    assert [(name, resolved) for _, name, resolved in found if name in ("field", "asyncio", "type")] == [
        ("field", None),
        ("asyncio", None),
        ("asyncio", None),
        ("type", None),
        ("type", None),
    ]
    # Every walk sees the same scope object for the same comprehension.
    comprehension = next(node for node in ast.walk(walker.tree) if isinstance(node, ast.ListComp))
    assert walker.scopes[(4, "field")] is walker.names.expression_scope(comprehension, walker.names.root)


def test_binder_names_the_scope_whose_binding_a_reference_sees() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            import requests
            def f():
                session = requests.Session()
                def g():
                    return session
            """
        )
    )
    names = ModuleNames(tree, "app.module")
    f = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "f")
    g = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "g")
    assert names.scope_of(g).binder("session") is names.scope_of(f)
    assert names.scope_of(g).binder("requests") is names.root
    assert names.scope_of(g).binder("len") is None
    assert names.scope_of(f).bindings["session"] == LOCAL
    # An analysis's own table counts as bindings where the pre-pass records none (a `:=` target).
    table = {names.scope_of(g): {"session": ["own"]}}
    assert lookup_in(table, "session", names.scope_of(g)) == ["own"]
    assert lookup_in({names.root: {"session": ["module"]}}, "session", names.scope_of(g)) == []


def test_clients_and_their_constructions_are_indexed_in_the_scope_they_bind_in() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            import httpx
            client = None
            def setup():
                global client
                client = httpx.Client(timeout=3)
            def job():
                with httpx.Client() as own:
                    own.get("https://example.com")
                client.get("https://example.com")
                found = [(c := httpx.Client()) for _ in range(1)]
                c.get("https://example.com")
            """
        )
    )
    names = ModuleNames(tree, "app.module")
    network = NetworkCalls(tree, names)
    job = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "job")
    scope = names.scope_of(job)
    classified = [
        network.classify(node, seen_in) for node, seen_in in scoped_nodes(tree, names) if isinstance(node, ast.Call)
    ]
    apis = [found.api for found in classified if found is not None]
    assert apis == ["httpx.Client.get", "httpx.Client.get", "httpx.Client.get"]
    own = network.construction("own", scope)
    assert own is not None and ast.unparse(own) == "httpx.Client()"
    assert network.construction("client", scope) is None
    module_level = network.construction("client", names.root)
    assert module_level is not None and ast.unparse(module_level) == "httpx.Client(timeout=3)"


def test_sites_of_lists_every_candidate_binding_a_reference_sees() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            import asyncio as spawn
            def f(flag):
                global spawn
                if flag:
                    spawn = asyncio.create_task
                for spawn in helpers:
                    pass
            def g():
                return spawn
            """
        )
    )
    names = ModuleNames(tree, "app.module")
    g = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "g")
    binder = names.scope_of(g).binder("spawn")
    assert binder is names.root
    assert [type(site).__name__ for site in binder.sites_of("spawn")] == ["alias", "Assign", "For"]
    assert names.root.bindings["spawn"] == "asyncio"


def test_a_name_bound_to_several_known_names_resolves_to_each() -> None:
    tree = ast.parse(
        textwrap.dedent(
            """
            try:
                import threading
            except ImportError:
                import dummy_threading as threading
            worker = threading.Thread
            worker = make_worker()
            single = threading.Lock
            """
        )
    )
    names = ModuleNames(tree, "app.module")
    root = names.root
    assert root.lookup_all("threading") == ["threading", "dummy_threading"]
    # An alias of a name with several bindings has one candidate per binding; an unknown value adds none.
    assert root.lookup_all("worker") == ["threading.Thread", "dummy_threading.Thread"]
    assert [type(site).__name__ for site in root.sites_of("worker")] == ["Assign", "Assign"]
    assert names.resolve_all(ast.parse("single()", mode="eval").body, root) == []
    assert names.resolve_all(ast.parse("threading.Timer", mode="eval").body, root) == [
        "threading.Timer",
        "dummy_threading.Timer",
    ]
    # The single answer `resolve` gives is one of them; a local value has no candidates.
    assert names.resolve(ast.parse("threading", mode="eval").body, root) in root.lookup_all("threading")
    assert root.lookup_all("undefined_name") == []


def test_annotations_name_loop_types_only_through_an_import_of_their_package() -> None:
    # The pre-pass reads no annotation until an import binds a name into a loop type's package: no factory
    # makes a loop type, so nothing else can resolve to one.
    assert not {made.partition(".")[0] for made in FACTORIES.values()} & {name.partition(".")[0] for name in LOOP_TYPES}
    function_source = (
        'def late(loop: AbstractEventLoop, other: "aio.AbstractEventLoop", third: events.AbstractEventLoop):\n'
        "    pass\n"
    )
    for imports, expected in (
        ("", []),
        ("from asyncio import AbstractEventLoop\n", ["loop"]),
        ("import asyncio as aio\n", ["other"]),
        ("from asyncio import events\n", ["third"]),
    ):
        tree = ast.parse(imports + function_source)
        names = ModuleNames(tree, "app.module")
        function = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
        bound = names.scope_of(function).bindings
        assert [name for name, target in bound.items() if target == LOOP] == expected, imports
    # Inside the asyncio package, a relative import reaches the loop types too.
    tree = ast.parse("from .events import AbstractEventLoop\ndef f(loop: AbstractEventLoop): pass\n")
    names = ModuleNames(tree, "asyncio.tasks")
    function = tree.body[1]
    assert isinstance(function, ast.FunctionDef)
    assert names.scope_of(function).bindings["loop"] == LOOP
