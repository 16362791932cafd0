"""How many processes the project's deployment files run: docker compose, Kubernetes manifests and
`gunicorn.conf.py`, read as data (YAML composed with PyYAML's safe loader, Python parsed with `ast`), never
executed.

A compose file at the root (the first of Compose's own order: `compose.yaml`, `compose.yml`,
`docker-compose.yaml`, `docker-compose.yml`, with its `.override` file merged over it) and every `.yaml` /
`.yml` document under the configured manifest folders (`Deployment`, `StatefulSet`, `ReplicaSet`, scaled up to
a `HorizontalPodAutoscaler`'s `maxReplicas` when one targets it) are searched for what runs `corral worker`,
or `<program> ... worker` for the programs a caller names (`command` / `entrypoint`, `args`, in string or list
form, also through `sh -c "..."`); each such service or container is a `WorkerProcesses` with the count it
runs, where the count stands and its command. `gunicorn.conf.py` at the root gives the web server's `workers`
when it is a module-level integer. A count the files do not spell as a whole number (a `${REPLICAS}`
substitution, a template, `deploy.mode: global`, a YAML error) is an `UnreadableCount` with its file, line and
reason: the caller reports it, it never guesses.

`deployment_inputs` names every file this module reads (or would read, were it there) with a digest of its
bytes, so that a cached whole-project result is not served once one of them changes, appears or goes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from corral.gates.config import DEFAULT_MAX_FILE_SIZE
from corral.gates.source.parsing import Uncheckable, read_source

if TYPE_CHECKING:
    import yaml

# Compose's own order of preference: the first that exists is the project's compose file.
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
GUNICORN_CONFIG = "gunicorn.conf.py"
MANIFEST_SUFFIXES = (".yaml", ".yml")
# The kinds whose `spec.replicas` is a count of identical pods (a DaemonSet's count is the cluster's nodes).
REPLICATED_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
# `python -m <module> worker` runs corral's worker command through these modules.
CORRAL_MODULES = frozenset({"corral", "corral.gates", "corral.runtime.cli"})
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")  # longer: no count of processes, and past int()'s limit
_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class WorkerCommand(NamedTuple):
    """A command that runs a worker: `corral` (`target`: the `MODULE:RUNTIME` it names, or empty), or
    another program the caller asked for, with the `arguments` after its `worker`."""

    program: str
    target: str
    arguments: tuple[str, ...] = ()


class WorkerProcesses(NamedTuple):
    """A service (compose) or container (Kubernetes) that runs a worker: how many processes it runs,
    where that count stands (`path:line` and what set it), and its command."""

    path: str
    line: int
    processes: int
    origin: str
    command: WorkerCommand
    # Where the command stands (`path:line`), which may be another file (an override) or another line.
    command_at: str


class UnreadableCount(NamedTuple):
    """A count of processes the deployment files declare in a way the gate cannot read, and the
    `MODULE:RUNTIME` of the worker it counts (None: a file the gate could not read at all)."""

    path: str
    line: int
    reason: str
    command: WorkerCommand | None = None


class WebWorkers(NamedTuple):
    """gunicorn's `workers`, a module-level integer in `gunicorn.conf.py`."""

    path: str
    line: int
    workers: int


class Deployments(NamedTuple):
    """What the deployment files say about processes."""

    workers: tuple[WorkerProcesses, ...]
    unreadable: tuple[UnreadableCount, ...]
    # gunicorn's workers: read, unreadable (reported only where they count) or not declared.
    web: WebWorkers | UnreadableCount | None


def compose_files(root: Path) -> list[str]:
    """The compose file Compose would pick at `root` and its override file, those that exist (a link to a
    device or a FIFO too: reading it says why it cannot count)."""
    for name in COMPOSE_FILES:
        if os.path.lexists(root / name):
            return [name, _override(name)] if os.path.lexists(root / _override(name)) else [name]
    return []


def _override(name: str) -> str:
    """The file Compose merges over `name` by default: `compose.yaml` -> `compose.override.yaml`."""
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.override.{suffix}"


def manifest_files(root: Path, folders: tuple[str, ...]) -> tuple[list[str], list[UnreadableCount]]:
    """Every YAML file under the configured manifest folders, as paths relative to `root`, sorted; and the
    folders below them that cannot be listed (a manifest in one would go uncounted)."""
    found: list[str] = []
    unlisted: list[UnreadableCount] = []

    def unlistable(error: OSError) -> None:
        where = Path(error.filename or root).relative_to(root).as_posix()
        unlisted.append(UnreadableCount(where, 1, f"cannot be listed: {error.strerror or error}"))

    for folder in folders:
        if not (root / folder).is_dir():
            continue  # `read_deployments` reports it; `deployment_inputs` stamps it absent
        for directory, subfolders, names in os.walk(root / folder, onerror=unlistable):
            subfolders.sort()
            for name in names:
                if name.endswith(MANIFEST_SUFFIXES):
                    found.append(Path(directory, name).relative_to(root).as_posix())
    return sorted(set(found)), unlisted


def deployment_inputs(root: Path, folders: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """Every file `read_deployments` reads or would read, with a digest of its content (`absent` for one
    that is not there, None for one that cannot be read: the result depends on it and cannot be cached);
    a missing manifest folder is an input too, so that creating it is seen."""
    manifests, unlisted = manifest_files(root, folders)
    names = [*COMPOSE_FILES, *map(_override, COMPOSE_FILES), GUNICORN_CONFIG, *manifests]
    inputs: list[tuple[str, str | None]] = [(name, _digest(root / name)) for name in names]
    inputs += [(f"{folder.path}/", None) for folder in unlisted]
    inputs += [(f"{folder}/", "folder" if (root / folder).is_dir() else "absent") for folder in folders]
    return inputs


def _digest(path: Path) -> str | None:
    try:
        return hashlib.blake2b(read_source(str(path), DEFAULT_MAX_FILE_SIZE), digest_size=16).hexdigest()
    except FileNotFoundError:
        return "absent"
    except (OSError, Uncheckable):
        return None


def read_deployments(root: Path, folders: tuple[str, ...], programs: frozenset[str] = frozenset()) -> Deployments:
    """What the compose file, the manifests under `folders` and `gunicorn.conf.py` at `root` declare; the
    workers of `programs` (run as `<program> ... worker`) are found beside corral's."""
    workers: list[WorkerProcesses] = []
    unreadable: list[UnreadableCount] = []
    services: dict[str, dict[str, tuple[str, yaml.Node]]] = {}
    for name in compose_files(root):
        for document in _documents(root, name, unreadable):
            _merge_services(name, document, services)
    for service, fields in sorted(services.items()):
        _compose_service(service, fields, programs, workers, unreadable)
    for folder in folders:
        if not (root / folder).is_dir():
            # A misspelt folder that counted nothing would pass a budget the manifests break.
            unreadable.append(UnreadableCount(folder, 1, "is named by kubernetes-manifests but is no folder"))
    manifests, unlisted = manifest_files(root, folders)
    unreadable += unlisted
    documents = [(name, document) for name in manifests for document in _documents(root, name, unreadable)]
    autoscalers = _autoscalers(documents)
    for name, document in documents:
        _manifest(name, document, programs, autoscalers, workers, unreadable)
    return Deployments(tuple(workers), tuple(unreadable), _gunicorn_workers(root))


def _documents(root: Path, relpath: str, unreadable: list[UnreadableCount]) -> list[yaml.Node]:
    """The documents of one YAML file as node trees (lines kept); none, with the reason, when it cannot be
    read or is not YAML."""
    import yaml

    try:
        text = read_source(str(root / relpath), DEFAULT_MAX_FILE_SIZE).decode("utf-8")
    except Uncheckable as refused:  # a link to a device, a FIFO, a file over the size limit: never read
        unreadable.append(UnreadableCount(relpath, 1, refused.reason))
        return []
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        unreadable.append(UnreadableCount(relpath, 1, f"cannot be read: {reason}"))
        return []
    try:
        return [node for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]
    except RecursionError:
        unreadable.append(UnreadableCount(relpath, 1, "is nested too deeply to read"))
        return []
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(error, "problem", None) or str(error)
        unreadable.append(UnreadableCount(relpath, line, f"is not valid YAML: {problem}"))
        return []


def _mapping(node: yaml.Node | None, merging: frozenset[int] = frozenset()) -> dict[str, yaml.Node]:
    """A YAML mapping's entries by key, `<<` merge keys applied (explicit keys win, as YAML says); empty
    for anything that is not a mapping. `merging`: the mappings being merged already (an anchor merged
    into itself adds no key it does not hold)."""
    import yaml

    if not isinstance(node, yaml.MappingNode) or id(node) in merging:
        return {}
    entries: dict[str, yaml.Node] = {}
    merged: dict[str, yaml.Node] = {}
    for key, value in node.value:
        if key.tag == _MERGE_TAG:
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for source in reversed(sources):
                merged.update(_mapping(source, merging | {id(node)}))
        elif isinstance(key, yaml.ScalarNode):
            entries[str(key.value)] = value
    return {**merged, **entries}


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _merge_services(relpath: str, document: yaml.Node, services: dict[str, dict[str, tuple[str, yaml.Node]]]) -> None:
    """Each service's fields that matter here, a later (override) file's replacing an earlier one's."""
    for service, node in _mapping(_mapping(document).get("services")).items():
        fields = services.setdefault(service, {})
        body = _mapping(node)
        for field in ("command", "entrypoint", "scale"):
            if field in body:
                fields[field] = (relpath, body[field])
        deploy = _mapping(body.get("deploy"))
        for field in ("replicas", "mode"):
            if field in deploy:
                fields[f"deploy.{field}"] = (relpath, deploy[field])


def _compose_service(
    service: str,
    fields: dict[str, tuple[str, yaml.Node]],
    programs: frozenset[str],
    workers: list[WorkerProcesses],
    unreadable: list[UnreadableCount],
) -> None:
    runs = _worker_command([fields[field][1] for field in ("entrypoint", "command") if field in fields], programs)
    if runs is None:
        return
    program = f"{runs.program} worker"
    where = fields.get("command") or fields.get("entrypoint")
    assert where is not None  # a service runs the worker only through one of them
    command_at = f"{where[0]}:{_line(where[1])}"
    mode = fields.get("deploy.mode")
    if mode is not None and _scalar(mode[1]) == "global":
        reason = f"service {service} runs {program} with deploy.mode global: one per node, a count no file states"
        unreadable.append(UnreadableCount(mode[0], _line(mode[1]), reason, runs))
        return
    counts: list[tuple[str, str, yaml.Node, int]] = []
    for field in ("deploy.replicas", "scale"):
        if field in fields:
            relpath, node = fields[field]
            count = _count(node)
            if isinstance(count, str):
                reason = f"service {service} runs {program} and its {field} is {count}"
                unreadable.append(UnreadableCount(relpath, _line(node), reason, runs))
                return
            counts.append((field, relpath, node, count))
    if len({count for *_, count in counts}) > 1:
        (first, path, node, count), (second, _, _, other) = counts
        reason = f"service {service} runs {program} with {first} {count} but {second} {other}"
        unreadable.append(UnreadableCount(path, _line(node), reason, runs))
        return
    if counts:
        field, relpath, node, count = counts[0]
        workers.append(WorkerProcesses(relpath, _line(node), count, f"service {service}, {field}", runs, command_at))
    else:
        relpath, node = where
        origin = f"service {service}, no deploy.replicas: Compose runs one"
        workers.append(WorkerProcesses(relpath, _line(node), 1, origin, runs, command_at))


def _manifest(
    relpath: str,
    document: yaml.Node,
    programs: frozenset[str],
    autoscalers: dict[tuple[str, str], tuple[str, str, yaml.Node]],
    workers: list[WorkerProcesses],
    unreadable: list[UnreadableCount],
) -> None:
    top = _mapping(document)
    kind = _scalar(top.get("kind"))
    spec = _mapping(top.get("spec"))
    pod = _mapping(_mapping(spec.get("template")).get("spec"))
    name = _scalar(_mapping(top.get("metadata")).get("name")) or "?"
    for container in _sequence(pod.get("containers")):
        body = _mapping(container)
        runs = _worker_command(
            [node for field in ("command", "args") if (node := body.get(field)) is not None], programs
        )
        if runs is None:
            continue
        label = f"{kind} {name}, container {_scalar(body.get('name')) or '?'}"
        program = f"{runs.program} worker"
        if kind not in REPLICATED_KINDS:
            reason = f"{label} runs {program}, and a {kind}'s count of pods is not stated in its manifest"
            unreadable.append(UnreadableCount(relpath, _line(container), reason, runs))
            continue
        command_at = f"{relpath}:{_line(container)}"
        autoscaler = autoscalers.get((kind, name))
        if autoscaler is not None:
            # The autoscaler runs up to its maxReplicas, whatever spec.replicas starts with.
            path, scaler, maximum = autoscaler
            count = _count(maximum)
            if isinstance(count, str):
                reason = f"{label} runs {program}; HorizontalPodAutoscaler {scaler}'s maxReplicas is {count}"
                unreadable.append(UnreadableCount(path, _line(maximum), reason, runs))
                continue
            origin = f"{label}, HorizontalPodAutoscaler {scaler} maxReplicas"
            workers.append(WorkerProcesses(path, _line(maximum), count, origin, runs, command_at))
            continue
        replicas = spec.get("replicas")
        if replicas is None:
            origin = f"{label}, no replicas: one pod"
            workers.append(WorkerProcesses(relpath, _line(container), 1, origin, runs, command_at))
            continue
        count = _count(replicas)
        if isinstance(count, str):
            reason = f"{label} runs {program} and its replicas is {count}"
            unreadable.append(UnreadableCount(relpath, _line(replicas), reason, runs))
            continue
        origin = f"{label}, spec.replicas"
        workers.append(WorkerProcesses(relpath, _line(replicas), count, origin, runs, command_at))


def _autoscalers(documents: list[tuple[str, yaml.Node]]) -> dict[tuple[str, str], tuple[str, str, yaml.Node]]:
    """Each `HorizontalPodAutoscaler`'s target (its kind and name) with the file, name and `maxReplicas`
    node of the autoscaler; a target without a `maxReplicas` keeps an unreadable node (a `null`)."""
    import yaml

    found: dict[tuple[str, str], tuple[str, str, yaml.Node]] = {}
    for relpath, document in documents:
        top = _mapping(document)
        if _scalar(top.get("kind")) != "HorizontalPodAutoscaler":
            continue
        spec = _mapping(top.get("spec"))
        target = _mapping(spec.get("scaleTargetRef"))
        kind, name = _scalar(target.get("kind")), _scalar(target.get("name"))
        if kind is None or name is None:
            continue
        maximum = spec.get("maxReplicas") or yaml.ScalarNode("tag:yaml.org,2002:null", "", document.start_mark)
        found[(kind, name)] = (relpath, _scalar(_mapping(top.get("metadata")).get("name")) or "?", maximum)
    return found


def _gunicorn_workers(root: Path) -> WebWorkers | UnreadableCount | None:
    """`workers = N` at the top level of `gunicorn.conf.py`; the last binding counts, as when Python runs it."""
    import ast

    path = root / GUNICORN_CONFIG
    if not os.path.lexists(path):
        return None
    try:
        tree = ast.parse(read_source(str(path), DEFAULT_MAX_FILE_SIZE), GUNICORN_CONFIG)
    except Uncheckable as refused:
        return UnreadableCount(GUNICORN_CONFIG, 1, refused.reason)
    except (OSError, SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None) or 1
        return UnreadableCount(GUNICORN_CONFIG, line, f"cannot be parsed: {error}")
    found: WebWorkers | UnreadableCount | None = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if not any(isinstance(target, ast.Name) and target.id == "workers" for target in targets):
            continue
        if (
            isinstance(value, ast.Constant)
            and isinstance(value.value, int)
            and not isinstance(value.value, bool)
            and value.value >= 1
        ):
            found = WebWorkers(GUNICORN_CONFIG, statement.lineno, value.value)
        else:
            reason = f"workers = {ast.unparse(value)} is not a whole number >= 1 readable without running the file"
            found = UnreadableCount(GUNICORN_CONFIG, statement.lineno, reason)
    return found


def _sequence(node: yaml.Node | None) -> list[yaml.Node]:
    import yaml

    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _scalar(node: yaml.Node | None) -> str | None:
    import yaml

    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _count(node: yaml.Node) -> int | str:
    """A whole number >= 0 (an integer, or a string of digits), else why it is not one."""
    value = _scalar(node)
    if value is None:
        return "not a number"
    if node.tag in (_INT_TAG, _STR_TAG) and _WHOLE_NUMBER.fullmatch(value):
        return int(value)
    shown = repr(value if len(value) <= 60 else value[:60] + "...")
    if "${" in value or "{{" in value:
        return f"{shown}, filled in at deploy time (a substitution the gate cannot read)"
    return f"{shown}, not a whole number the gate can count with"


def _worker_command(nodes: list[yaml.Node], programs: frozenset[str]) -> WorkerCommand | None:
    """What the command made of `nodes` runs: `corral worker` (also `python -m corral.runtime.cli worker`)
    or `<program> ... worker` for one of `programs` (also `python -m <program>`); None when neither."""
    words = list(_words(nodes))
    for index, word in enumerate(words):
        rest = words[index + 1 :]
        if os.path.basename(word) == "corral" and rest[:1] == ["worker"]:
            return WorkerCommand("corral", _target(rest[1:]))
        if word == "-m" and rest[:1] and rest[0] in CORRAL_MODULES and rest[1:2] == ["worker"]:
            return WorkerCommand("corral", _target(rest[2:]))
        program = rest[0] if word == "-m" and rest else os.path.basename(word)
        if program in programs and "worker" in rest:
            return WorkerCommand(program, "", tuple(rest[rest.index("worker") + 1 :]))
    return None


def _target(arguments: list[str]) -> str:
    return next((argument for argument in arguments if ":" in argument and not argument.startswith("-")), "")


def _words(nodes: list[yaml.Node]) -> Iterator[str]:
    """The words of a command in string or list form; a word holding spaces (`sh -c "corral worker x"`) is
    split again, as the shell it is handed to would."""
    for node in nodes:
        items = [_scalar(item) for item in _sequence(node)] if _scalar(node) is None else [_scalar(node)]
        for item in items:
            if item is None:
                continue
            try:
                yield from shlex.split(item)
            except ValueError:
                yield from item.split()
