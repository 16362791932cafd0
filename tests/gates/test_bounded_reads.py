"""What the gate will not read, and what it reads however deep: non-regular files and files over the size limit
are CRL001 without being read (never blocking, never reading without end); a valid file nested deeper than
the default recursion limit is checked; a file Python itself cannot compile stays CRL001."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import run_corral

SPAWN = "import threading\nthreading.Thread(target=print).start()\n"


def _only_posix() -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("FIFOs and /dev/zero are POSIX")


def test_a_link_to_a_device_is_not_read(project) -> None:
    _only_posix()
    root = project({"app.py": SPAWN})
    (root / "zero.py").symlink_to("/dev/zero")
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 1
    assert "zero.py:1:1: CRL001 file is not a regular file (a character device)" in completed.stdout
    assert "app.py:2:1: CRL101" in completed.stdout


def test_a_fifo_named_on_the_command_line_does_not_block(project) -> None:
    _only_posix()
    root = project({})
    os.mkfifo(root / "pipe.py")
    # run_corral times out (an error) if the gate waits for a writer.
    completed = run_corral("check", "pipe.py", "--no-cache", cwd=root)
    assert completed.returncode == 1
    assert "pipe.py:1:1: CRL001 file is not a regular file (a FIFO)" in completed.stdout
    # A FIFO in a walked folder too (outside git, the walk finds it).
    assert "pipe.py:1:1: CRL001 file is not a regular file" in run_corral("check", ".", cwd=root).stdout


def test_a_file_over_the_size_limit_is_not_read(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nmax-file-size = 1000\n", "small.py": SPAWN})
    (root / "big.py").write_text(SPAWN + "x = 1\n" * 200)
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 1
    assert "big.py:1:1: CRL001 file is too large to check (1256 bytes, over max-file-size = 1000)" in completed.stdout
    assert "small.py:2:1: CRL101" in completed.stdout
    # Under the default limit (10 MB) the same file is checked.
    (root / "pyproject.toml").write_text("[tool.corral]\n")
    checked = run_corral("check", "--no-cache", cwd=root)
    assert "big.py:2:1: CRL101" in checked.stdout and "CRL001" not in checked.stdout
    (root / "pyproject.toml").write_text("[tool.corral]\nmax-file-size = 0\n")
    assert "key 'max-file-size' must be a positive number of bytes" in run_corral("check", cwd=root).stderr


def test_the_default_limit_is_ten_megabytes(project) -> None:
    root = project({})
    (root / "huge.py").write_bytes(b"x = 1\n" * (10 * 1024 * 1024 // 6 + 1))
    completed = run_corral("check", "--no-cache", cwd=root)
    assert "huge.py:1:1: CRL001 file is too large to check" in completed.stdout


def _elif_chain(branches: int) -> str:
    arms = "".join(f"    elif x == {i}:\n        threading.Thread(target=print).start()\n" for i in range(1, branches))
    return "import threading\n\n\ndef pick(x):\n    if x == 0:\n        return 0\n" + arms


@pytest.mark.parametrize("branches", [400, 2500])
def test_a_long_elif_chain_is_checked(project, branches: int) -> None:
    root = project({"chain.py": _elif_chain(branches)})
    compile((root / "chain.py").read_text(), "chain.py", "exec")  # the running Python compiles it
    completed = run_corral("check", "--no-cache", cwd=root)
    assert "CRL001" not in completed.stdout
    assert completed.stdout.count("CRL101") == branches - 1
    assert f"chain.py:{2 * branches + 4}:9: CRL101" in completed.stdout


def test_a_long_expression_is_checked(project) -> None:
    terms = " + ".join(["threading.Thread(target=print).start()"] * 1000)
    root = project({"sum.py": f"import threading\nx = {terms}\n"})
    completed = run_corral("check", "--no-cache", cwd=root)
    assert "CRL001" not in completed.stdout
    assert completed.stdout.count("CRL101") == 1000


def test_a_file_python_cannot_compile_stays_uncheckable(project) -> None:
    source = SPAWN + "x = " + "-" * 20_000 + "1\n"
    with pytest.raises((RecursionError, MemoryError, SyntaxError)):
        compile(source, "deep.py", "exec")
    root = project({"deep.py": source})
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 1
    assert "deep.py:1:1: CRL001 file is nested too deeply" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_the_raised_limit_is_given_back(tmp_path: Path) -> None:
    from corral.gates.config import Config
    from corral.gates.engine.run import check_source

    before = sys.getrecursionlimit()
    result = check_source("chain.py", _elif_chain(600).encode(), Config(root=tmp_path))
    assert {finding.code for finding in result.findings} == {"CRL101"}
    assert sys.getrecursionlimit() == before


def test_deployment_files_linked_to_a_device_are_not_read(tmp_path: Path) -> None:
    _only_posix()
    import shutil

    root = tmp_path / "service"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples", root)
    (root / "docker-compose.yml").symlink_to("/dev/zero")
    (root / "gunicorn.conf.py").symlink_to("/dev/zero")
    completed = run_corral("check", "--no-cache", cwd=root)
    assert completed.returncode == 1
    assert "docker-compose.yml:1:1: CRL302 is not a regular file (a character device)" in completed.stdout
    assert "gunicorn.conf.py:1:1: CRL001 file is not a regular file (a character device)" in completed.stdout
