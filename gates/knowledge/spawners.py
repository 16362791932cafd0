"""What counts as unmanaged concurrency: the APIs that start work outliving the current call.

One table, read by the CRL1 rules and by `corral export ruff`. Keys are fully-qualified names as
`corral.gates.analysis.names` resolves them (`<loop>.create_task` for a method on any asyncio event loop).
"""

from __future__ import annotations

import re

from corral.gates.source.prefilter import Source

# The kinds of spawner; the CRL1 rule reports each kind under a code of its own.
THREAD = "thread"
PROCESS = "process"
EXECUTOR = "executor"
TASK = "task"
LOOP_METHOD = "loop method"
CONFIGURED = "configured"

SPAWNERS: dict[str, str] = {
    "threading.Thread": THREAD,
    "threading.Timer": THREAD,
    "_thread.start_new_thread": THREAD,
    "_thread.start_new": THREAD,
    "multiprocessing.dummy.Process": THREAD,
    "multiprocessing.Process": PROCESS,
    "multiprocessing.context.Process": PROCESS,
    "multiprocessing.process.BaseProcess": PROCESS,
    "os.fork": PROCESS,
    "os.forkpty": PROCESS,
    "pty.fork": PROCESS,
    "os.posix_spawn": PROCESS,
    "os.posix_spawnp": PROCESS,
    # A manager is a server process that lives until it is shut down (or the program exits).
    "multiprocessing.Manager": PROCESS,
    "multiprocessing.managers.BaseManager": PROCESS,
    "multiprocessing.managers.SyncManager": PROCESS,
    "multiprocessing.managers.SharedMemoryManager": PROCESS,
    # Servers that start a thread or a process per request.
    "socketserver.ThreadingMixIn": THREAD,
    "socketserver.ThreadingTCPServer": THREAD,
    "socketserver.ThreadingUDPServer": THREAD,
    "socketserver.ThreadingUnixStreamServer": THREAD,
    "socketserver.ThreadingUnixDatagramServer": THREAD,
    "http.server.ThreadingHTTPServer": THREAD,
    "socketserver.ForkingMixIn": PROCESS,
    "socketserver.ForkingTCPServer": PROCESS,
    "socketserver.ForkingUDPServer": PROCESS,
    "socketserver.ForkingUnixStreamServer": PROCESS,
    "socketserver.ForkingUnixDatagramServer": PROCESS,
    "concurrent.futures.ThreadPoolExecutor": EXECUTOR,
    "concurrent.futures.ProcessPoolExecutor": EXECUTOR,
    "concurrent.futures.InterpreterPoolExecutor": EXECUTOR,
    "concurrent.futures.thread.ThreadPoolExecutor": EXECUTOR,
    "concurrent.futures.process.ProcessPoolExecutor": EXECUTOR,
    "multiprocessing.Pool": EXECUTOR,
    "multiprocessing.pool.Pool": EXECUTOR,
    "multiprocessing.pool.ThreadPool": EXECUTOR,
    "multiprocessing.dummy.Pool": EXECUTOR,
    "asyncio.create_task": TASK,
    "asyncio.ensure_future": TASK,
    "asyncio.run_coroutine_threadsafe": TASK,
    "asyncio.tasks.create_task": TASK,
    "asyncio.tasks.ensure_future": TASK,
    "asyncio.tasks.run_coroutine_threadsafe": TASK,
    # Constructing a task schedules its coroutine, as `create_task` does.
    "asyncio.Task": TASK,
    "asyncio.tasks.Task": TASK,
    # Processes that outlive the call unless the scope waits for them (see `WAITED_FOR`).
    "subprocess.Popen": PROCESS,
    "asyncio.create_subprocess_exec": PROCESS,
    "asyncio.create_subprocess_shell": PROCESS,
    "asyncio.subprocess.create_subprocess_exec": PROCESS,
    "asyncio.subprocess.create_subprocess_shell": PROCESS,
    **{f"os.spawn{suffix}": PROCESS for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")},
    "<loop>.create_task": LOOP_METHOD,
    "<loop>.run_in_executor": LOOP_METHOD,
}

# Spawners judged only where they are called: their names are also types (`asyncio.Task` in an
# `isinstance`, `subprocess.Popen` in a signature), and whether the work outlives the call depends on the
# call (its mode, whether the scope waits for the process).
CALLED_ONLY = frozenset(
    {"asyncio.Task", "asyncio.tasks.Task", "subprocess.Popen"}
    | {name for name in SPAWNERS if name.startswith(("os.spawn", "asyncio.create_subprocess", "asyncio.subprocess."))}
)
# A process the same scope waits for ends before the call returns: `with Popen(...)`, or the name it is
# bound to has one of these methods called in that scope (`proc.wait()`, `await proc.communicate()`).
WAITED_FOR = frozenset({"subprocess.Popen"}) | {name for name in SPAWNERS if "create_subprocess" in name}
WAITING_METHODS = frozenset({"wait", "communicate"})
# `os.spawn*(mode, ...)` outlives the call unless the mode is `os.P_WAIT`.
SPAWN_MODE_FUNCTIONS = frozenset(name for name in SPAWNERS if name.startswith("os.spawn"))
SPAWN_WAITS = "os.P_WAIT"

# A task its own scope awaits (directly, by the name it is bound to, or through these functions) ends
# before the scope does: structured, not fire-and-forget.
AWAITABLE_TASKS = frozenset(
    {"asyncio.create_task", "asyncio.ensure_future", "asyncio.tasks.create_task", "asyncio.tasks.ensure_future"}
    | {"asyncio.Task", "asyncio.tasks.Task", "<loop>.create_task"}
)
TASK_WAITERS = frozenset(
    f"{module}.{name}" for module in ("asyncio", "asyncio.tasks") for name in ("gather", "wait", "wait_for", "shield")
)
TASKS_ITERATED = frozenset({"asyncio.as_completed", "asyncio.tasks.as_completed"})

# Modules whose attributes, fetched by a name the gate cannot read, may be one of the spawners.
SPAWNER_MODULES = frozenset(
    {"threading", "_thread", "os", "pty", "asyncio", "asyncio.tasks", "asyncio.subprocess", "<loop>"}
    | {"subprocess", "socketserver", "http.server", "multiprocessing.managers"}
    | {"multiprocessing", "multiprocessing.context", "multiprocessing.pool", "multiprocessing.dummy"}
    | {"concurrent.futures", "concurrent.futures.thread", "concurrent.futures.process"}
)


def spawner_kind(name: str | None, extra: tuple[str, ...] = ()) -> str | None:
    """The kind of spawner a resolved name is (`extra`: the configured `extend-spawners`), or None when it
    starts nothing."""
    if name is None:
        return None
    kind = SPAWNERS.get(name)
    if kind is None and name in extra:
        return CONFIGURED
    return kind


def display_name(name: str) -> str:
    return name.replace("<loop>", "loop")


# -- what the prefilters of the CRL1 rules read ---------------------------------------------------------
# A name resolves to a spawner module only through an import that names it, so a file whose imports name
# none of these packages (nor `os` / `pty`) holds no CRL1 finding.
# `server` stands for `socketserver` and `http.server` (also `from http import server`): `http` alone would
# admit every Django view (`django.http`).
PACKAGE_WORDS = (b"thread", b"multiprocessing", b"concurrent", b"asyncio", b"subprocess", b"server")
OS_OR_PTY = re.compile(rb"(?<![\w.\x80-\xff])(?:os|pty)(?![\w\x80-\xff])")


# Each spawner's own name, and the packages it can come from (`create_task` of a loop: asyncio).
SPAWNER_NAMES: dict[bytes, frozenset[str]] = {}
for _name in SPAWNERS:
    _module, _, _leaf = _name.rpartition(".")
    _package = "asyncio" if _module == "<loop>" else _module.partition(".")[0]
    SPAWNER_NAMES[_leaf.encode()] = SPAWNER_NAMES.get(_leaf.encode(), frozenset()) | {_package}


def may_import(source: Source, module: str) -> bool:
    """Whether a name in the file may resolve into `module`: its imports name the module's package, or
    the file lies inside that package (a project's own module, which relative imports reach)."""
    package = module.partition(".")[0]
    if package in ("os", "pty"):
        return source.holds(imports_os)
    return source.imports_any(package.encode()) or source.package[:1] == [package]


def imports_os(source: Source) -> bool:
    """Whether the file's imports may bind `os` or `pty` (whose `fork` spawns)."""
    return source.imports_any(b"os", b"pty") and OS_OR_PTY.search(source.imports) is not None


def imports_spawner_module(source: Source) -> bool:
    """False only when no name in the file can resolve to a spawner module, one of its submodules, or an
    event loop (whose factories and types live in asyncio)."""
    return source.imports_any(*PACKAGE_WORDS) or source.holds(imports_os)
