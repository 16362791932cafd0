"""The gate's worker processes: every path answered once, whatever a worker does, while paths still come; what
every worker needs of the whole project computed once, before they start."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import spawned_targets
from conftest import copy_project
from corral.gates.config import load_config
from corral.gates.engine import run
from corral.gates.engine.infra import parallel
from corral.gates.knowledge import transaction_scopes

PARENT = os.getpid()
FIXTURES = Path(__file__).parents[1] / "fixtures"
SETTING: list[int] = []
PATHS = [f"/project/app/module_{number}.py" for number in range(400)]


def _configure(value: int) -> None:
    SETTING[:] = [value]


def _answer(path: str) -> tuple[str, int, float]:
    time.sleep(0.0005)  # long enough that the first worker cannot drain the queue alone
    return path.upper() + str(SETTING[0]), os.getpid(), time.monotonic()


def _dies_in_a_worker(path: str) -> str:
    if path.endswith("_7.py") and os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return path[::-1]


def _fails_in_a_worker(path: str) -> str:
    if path.endswith("3.py") and os.getpid() != PARENT:
        raise RuntimeError("a worker's bug")
    return path[::-1]


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _as_json(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _read_back(path: str, data: object) -> object:
    return tuple(data) if isinstance(data, list) else data


def _map(function, paths, start_after: int = 50):  # type: ignore[no-untyped-def]
    return parallel.map_paths(
        function,
        paths,
        start_after=start_after,
        initializer=_configure,
        initargs=(3,),
        to_json=_as_json,
        from_json=_read_back,
    )


needs_cores = pytest.mark.skipif(parallel.cores() < 2, reason="one core: no workers are started")


@needs_cores
def test_every_path_is_answered_once_by_the_workers() -> None:
    results = _map(_answer, PATHS)
    assert {path: value for path, (value, _, _) in results.items()} == {path: path.upper() + "3" for path in PATHS}
    workers = {pid for _, pid, _ in results.values()}
    assert PARENT not in workers and len(workers) >= 2


@needs_cores
def test_workers_check_paths_while_more_are_still_coming() -> None:
    last_yield: list[float] = []

    def slowly_found() -> Iterator[str]:
        for path in PATHS:
            time.sleep(0.0002)
            last_yield[:] = [time.monotonic()]
            yield path

    results = _map(_answer, slowly_found())
    assert len(results) == len(PATHS)
    assert min(finished for _, _, finished in results.values()) < last_yield[0]


def test_a_small_run_stays_in_this_process() -> None:
    results = _map(_answer, PATHS[:20])
    assert {pid for _, pid, _ in results.values()} == {PARENT}


@needs_cores
def test_a_killed_worker_loses_no_path() -> None:
    descriptors = _open_descriptors()
    assert _map(_dies_in_a_worker, PATHS) == {path: path[::-1] for path in PATHS}
    assert _open_descriptors() == descriptors


@needs_cores
def test_a_failing_worker_loses_no_path() -> None:
    assert _map(_fails_in_a_worker, PATHS) == {path: path[::-1] for path in PATHS}


def test_an_error_while_finding_paths_stops_the_workers() -> None:
    def broken() -> Iterator[str]:
        yield from PATHS[:100]
        raise FileNotFoundError("missing/")

    descriptors = _open_descriptors()
    with pytest.raises(FileNotFoundError):
        _map(_answer, broken())
    assert _open_descriptors() == descriptors
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_spawned_pool_for_platforms_without_fork() -> None:
    # Spawned workers import what they run: builtins keep the test independent of this module's path.
    results = parallel._map_in_spawned_pool(str.upper, PATHS[:40], 2, int, ())
    assert results == [path.upper() for path in PATHS[:40]]


WRAPPED_PROJECT = {
    "pyproject.toml": "[tool.corral]\n",
    "app/db.py": """
        from contextlib import contextmanager
        from django.db import transaction

        @contextmanager
        def db_transaction():
            with transaction.atomic():
                yield
        """,
    "app/views.py": """
        import requests
        from app.db import db_transaction

        def pay(url):
            with db_transaction():
                requests.post(url, timeout=5)
        """,
    # Enough other files that the run starts its workers.
    **{f"app/module_{number}.py": f"VALUE = {number}\n" for number in range(run.PARALLEL_THRESHOLD)},
}


@pytest.fixture
def summary_calls(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file to which every computation of the wrapper summary, in whichever process, appends that process's
    id (absent while there was none)."""
    calls = tmp_path_factory.mktemp("calls") / "pids"
    computed = transaction_scopes.wrapper_words

    def counted(root: Path, paths: Sequence[str]) -> frozenset[str]:
        with calls.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return computed(root, paths)

    monkeypatch.setattr(transaction_scopes, "wrapper_words", counted)
    return calls


def _check(root: Path, select: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    config = load_config([str(root)], None)
    result = run.check_paths([str(root)], config._replace(select=select or config.select), use_cache=False)
    return [(finding.path, finding.code) for finding in result.findings]


@needs_cores
def test_workers_inherit_the_project_summary_computed_once_before_they_start(
    project: Callable[[dict[str, str]], Path], summary_calls: Path
) -> None:
    assert _check(project(WRAPPED_PROJECT)) == [("app/views.py", "CRL401")]
    assert summary_calls.read_text().split() == [str(PARENT)]


@needs_cores
def test_a_summary_no_selected_rule_reads_is_not_computed(
    project: Callable[[dict[str, str]], Path], summary_calls: Path
) -> None:
    assert _check(project(WRAPPED_PROJECT), select=("CRL1",)) == []
    assert not summary_calls.exists()


def test_a_run_in_one_process_computes_a_summary_only_when_a_file_asks(
    project: Callable[[dict[str, str]], Path], summary_calls: Path
) -> None:
    root = project({"pyproject.toml": "[tool.corral]\n", "app/tests/test_values.py": "VALUE = 1\n"})
    assert _check(root) == []
    assert not summary_calls.exists()  # CRL401 does not judge tests: no prefilter asked
    (root / "app" / "values.py").write_text("VALUE = 1\n")
    assert _check(root) == []
    assert summary_calls.read_text().split() == [str(PARENT)]  # the file's CRL401 prefilter asked for it


def _refuses_a_workers_answer(path: str, data: object) -> object:
    answer = _read_back(path, data)
    if isinstance(answer, tuple) and answer[1] != PARENT:
        raise ValueError("an answer that does not read back")
    return answer


@needs_cores
def test_a_worker_answer_that_does_not_read_back_loses_no_path() -> None:
    results = parallel.map_paths(
        _answer, PATHS, start_after=50, initializer=_configure, initargs=(3,), to_json=_as_json,
        from_json=_refuses_a_workers_answer,
    )  # fmt: skip
    assert {path: value for path, (value, _, _) in results.items()} == {path: path.upper() + "3" for path in PATHS}
    assert {pid for _, pid, _ in results.values()} == {PARENT}


@needs_cores
def test_results_sent_back_as_json_are_the_results_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Findings, typed facts (job kinds, runtimes) and dependencies cross from the workers whole."""
    roots, facts = [], []
    for name in ("crl2_projects/django_celery", "crl4_projects/wrappers"):
        copy_project(FIXTURES / name, tmp_path / name)
        roots.append(tmp_path / name)
    for root in roots:
        for number in range(run.PARALLEL_THRESHOLD):
            (root / f"filler_{number}.py").write_text(f"VALUE = {number}\n")
        config = load_config([str(root)], None)
        forked = run.check_paths([str(root)], config, use_cache=False)
        with monkeypatch.context() as one_core:
            one_core.setattr(parallel, "cores", lambda: 1)
            alone = run.check_paths([str(root)], config, use_cache=False)
        assert forked.findings == alone.findings and forked.findings
        assert forked.reports == alone.reports
        assert {relpath: (result.findings, result.typed_facts(), result.dependencies) for relpath, result in
                forked.results.items()} == {relpath: (result.findings, result.typed_facts(), result.dependencies)
                                            for relpath, result in alone.results.items()}  # fmt: skip
        facts.extend(kind for result in forked.results.values() for kind in result.typed_facts() or {})
    assert facts


def _read_back_with_setting(path: str, data: object) -> object:
    return f"{data}:{spawned_targets.SETTING[0]}"


def test_a_spawned_pool_reads_results_back_with_the_initializer_run_here(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned_targets.SETTING.clear()
    # A platform without fork: the spawned pool (chosen through `parallel.FORKS`: `sys.platform` is every
    # module's of this process).
    monkeypatch.setattr(parallel, "FORKS", False)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    results = parallel.map_paths(
        str.upper, PATHS[:40], start_after=20, initializer=spawned_targets.configure, initargs=(3,), to_json=str,
        from_json=_read_back_with_setting,
    )  # fmt: skip
    assert results == {path: f"{path.upper()}:3" for path in PATHS[:40]}


def test_a_spawned_worker_that_dies_leaves_no_path_unanswered(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pool that lost a worker is not waited on for ever: every path is checked here instead.
    monkeypatch.setattr(parallel, "FORKS", False)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    results = parallel.map_paths(
        spawned_targets.dies_in_a_spawned_worker, PATHS[:40], start_after=20,
        initializer=spawned_targets.configure, initargs=(3,),
        to_json=str, from_json=lambda path, data: data,
    )  # fmt: skip
    assert results == {path: path[::-1] for path in PATHS[:40]}
