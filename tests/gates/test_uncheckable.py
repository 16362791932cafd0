"""Fail closed: a file the gate cannot read as Python is a CRL001 finding, never a traceback or a pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_corral
from corral.gates.config import Config
from corral.gates.engine.run import check_source

CONFIG = Config(root=Path("/project"))


def findings(data: bytes, relpath: str = "app/x.py") -> list[tuple[int, str, str]]:
    return [(f.line, f.code, f.message) for f in check_source(relpath, data, CONFIG).findings]


def test_syntax_error_in_a_file_rules_look_at() -> None:
    ((line, code, message),) = findings(b"import threading\n\ndef f(:\n    threading.Thread()\n")
    assert (line, code) == (3, "CRL001")
    assert message.startswith("file has invalid syntax")


def test_nul_bytes() -> None:
    assert findings(b"x = 1\x00\n") == [(1, "CRL001", "file contains NUL bytes; it cannot be checked")]


def test_undecodable_bytes() -> None:
    ((line, code, message),) = findings(b"x = 1\ny = '\xff\xfe'\n")
    assert (line, code) == (2, "CRL001")
    assert "not valid utf-8" in message


def test_coding_cookie_is_honoured() -> None:
    source = "# -*- coding: latin-1 -*-\nimport threading\nname = 'caf\xe9'\nthreading.Thread()\n"
    assert [code for _, code, _ in findings(source.encode("latin-1"))] == ["CRL101"]


def test_unknown_encoding() -> None:
    ((_, code, message),) = findings(b"# coding: klingon\nimport threading\n")
    assert code == "CRL001"
    assert "klingon" in message


@pytest.mark.parametrize("depth", [200, 5000, 100_000])
def test_deep_nesting(depth: int) -> None:
    source = "import threading\nx = " + "(" * depth + "1" + ")" * depth + "\nthreading.Thread()\n"
    codes = {code for _, code, _ in findings(source.encode())}
    assert codes in ({"CRL101"}, {"CRL001"})


def test_deep_nesting_beyond_the_parser_is_crl001() -> None:
    source = "import threading\nx = " + "[" * 100_000 + "]" * 100_000 + "\nthreading.Thread()\n"
    assert {code for _, code, _ in findings(source.encode())} == {"CRL001"}


def test_unreadable_file_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    target = tmp_path / "secret.py"
    target.write_text("x = 1\n")
    target.chmod(0)
    try:
        if target.read_bytes():  # root can read it anyway: use a dangling path through a directory instead
            target.chmod(0o644)
            target.unlink()
            target.mkdir()
            (tmp_path / "dir.py").mkdir()
            broken = tmp_path / "link.py"
            broken.symlink_to(tmp_path / "nowhere.py")
    except PermissionError:
        pass
    completed = run_corral("check", "--no-cache", cwd=tmp_path)
    assert "Traceback" not in completed.stderr
    assert completed.returncode in (0, 1)


def test_cli_reports_crl001_with_path_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_bytes(b"import threading\nthreading.Thread(\n")
    (tmp_path / "nul.py").write_bytes(b"\x00")
    completed = run_corral("check", "--no-cache", cwd=tmp_path)
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("bad.py:2:")
    assert " CRL001 file has invalid syntax" in lines[0]
    assert lines[1] == "nul.py:1:1: CRL001 file contains NUL bytes; it cannot be checked"


def test_identifiers_are_read_as_python_reads_them() -> None:
    # NFKC: a fullwidth letter is the ASCII one; a UTF-7 cookie decodes `+AGY-` to `f`.
    fullwidth = "import threading\nthreading.\uff34hread()\n".encode()
    assert [code for _, code, _ in findings(fullwidth)] == ["CRL101"]
    utf7 = b"# coding: utf-7\nimport os\nos.+AGY-ork()\n"
    assert [(line, code) for line, code, _ in findings(utf7)] == [(3, "CRL102")]


def test_links_that_cannot_be_followed_are_crl001(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import os\nos.fork()\n")
    (tmp_path / "loop1.py").symlink_to(tmp_path / "loop2.py")
    (tmp_path / "loop2.py").symlink_to(tmp_path / "loop1.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    for args in (("check", "--no-cache"), ("check", "--no-cache", "loop1.py")):
        completed = run_corral(*args, cwd=tmp_path)
        assert "Traceback" not in completed.stderr
        assert completed.returncode == 1
        assert "loop1.py:1:1: CRL001 file cannot be read" in completed.stdout
    assert "dangling.py:1:1: CRL001 file cannot be read" in run_corral("check", "--no-cache", cwd=tmp_path).stdout
