"""The linter conventions of `corral check`, through the real command: `--version`, several `--format` /
`--output-file` reports from one run, `-` with `--stdin-filename`, `--statistics`, `-q`, `--color` with
NO_COLOR / FORCE_COLOR, each subcommand's own usage on a bad flag, and the help text."""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
from conftest import run_corral

SPAWNING = "import threading\nthreading.Thread(target=print).start()\n"
FORKING = "import os\nos.fork()\nos.fork()\n"
MESSAGE = "threading.Thread outside infra; enqueue a job or call an infra helper instead"
SARIF_SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())
ANSI = "\x1b["


def environment(**changes: str) -> dict[str, str]:
    """This environment without any colour setting, then `changes`."""
    kept = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    return {**kept, **changes}


def test_version_names_corral_python_and_libcst(tmp_path: Path) -> None:
    completed = run_corral("--version", cwd=tmp_path, check=True)
    expected = f"corral {version('corral')} (Python {platform.python_version()}, libcst {version('libcst')})\n"
    assert completed.stdout == expected


def test_one_run_writes_every_report_from_the_same_findings(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": "x = 1\n"})
    completed = run_corral(
        "check", "--format", "github", "--format", "sarif", "-o", "corral.sarif",
        "--format", "markdown", "--output-file", "summary.md", "--format", "junit", "-o", "junit.xml",
        cwd=root,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == [
        f"::error file=app/x.py,line=2,col=1,title=CRL101::{MESSAGE}",
        "Found 1 finding in 1 file (2 files checked).",
    ]
    sarif = json.loads((root / "corral.sarif").read_text())
    jsonschema.validators.validator_for(SARIF_SCHEMA)(SARIF_SCHEMA).validate(sarif)
    assert [result["ruleId"] for result in sarif["runs"][0]["results"]] == ["CRL101"]
    assert "**1 finding** in 1 of 2 checked files." in (root / "summary.md").read_text()
    assert 'failures="1"' in (root / "junit.xml").read_text()


def test_output_file_alone_takes_the_text_report_without_colour(project) -> None:
    root = project({"app/x.py": SPAWNING})
    completed = run_corral("check", "-o", "report.txt", "--color", "always", cwd=root)
    assert (completed.returncode, completed.stdout) == (1, "")
    assert (root / "report.txt").read_text() == (
        f"app/x.py:2:1: CRL101 {MESSAGE}\nFound 1 finding in 1 file (1 file checked).\n"
    )


def test_a_clean_run_still_writes_its_reports(project) -> None:
    root = project({"app/x.py": "x = 1\n"})
    completed = run_corral("check", "--format", "json", "-o", "out.json", cwd=root)
    assert (completed.returncode, completed.stdout) == (0, "")
    assert json.loads((root / "out.json").read_text())["findings"] == []


def test_a_report_that_cannot_be_written_fails_the_run_and_the_others_are_written(project) -> None:
    root = project({"app/x.py": "x = 1\n"})
    completed = run_corral(
        "check", "--format", "sarif", "-o", "missing/corral.sarif", "--format", "json", "-o", "out.json", cwd=root
    )
    assert completed.returncode == 2
    assert "corral: cannot write the sarif report to missing/corral.sarif: No such file or directory" in (
        completed.stderr
    )
    assert json.loads((root / "out.json").read_text())["findings"] == []
    assert completed.stdout == ""  # every report went to a file


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--format", "json", "--format", "sarif"],
            "--format json and --format sarif would both go to standard output",
        ),
        (["--format", "json", "-o", "r", "--format", "sarif", "-o", "r"], "would both write r"),
        (["--format", "json", "-o", "a", "-o", "b"], "-o b: the --format json before it already goes to a"),
        (["--statistics", "--format", "json"], "--statistics counts findings in the text report"),
        (["-"], "- reads the source from stdin: add --stdin-filename PATH"),
        (["-", "app", "--stdin-filename", "app/x.py"], "- (the source on stdin) is checked alone"),
        (["app", "--stdin-filename", "app/x.py"], "--stdin-filename names the source read from stdin"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_report_and_stdin_usage_errors_show_the_check_usage(project, args: list[str], message: str) -> None:
    completed = run_corral("check", *args, cwd=project({"app/x.py": "x = 1\n"}), stdin="")
    assert completed.returncode == 2
    assert completed.stderr.startswith("usage: corral check ")
    assert message in completed.stderr


@pytest.mark.parametrize("command", [["check"], ["baseline"], ["export", "ruff"], ["prove"], ["jobs", "--static"]])
def test_a_bad_flag_shows_the_subcommands_own_usage(tmp_path: Path, command: list[str]) -> None:
    completed = run_corral(*command, "--no-such-flag", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.startswith(f"usage: corral {command[0]} ")
    assert "unrecognized arguments: --no-such-flag" in completed.stderr


def test_a_bad_flag_without_a_subcommand_shows_the_top_usage(tmp_path: Path) -> None:
    completed = run_corral("--no-such-flag", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.startswith("usage: corral [-h] [--version]")


def test_stdin_is_judged_as_the_path_it_is_given(project) -> None:
    # On disk the file is clean: the finding can only come from the source on stdin.
    root = project({"app/x.py": "x = 1\n"})
    completed = run_corral("check", "-", "--stdin-filename", "app/x.py", cwd=root, stdin=SPAWNING)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == [
        f"app/x.py:2:1: CRL101 {MESSAGE}",
        "Found 1 finding in 1 file (1 file checked).",
    ]
    # The same source judged as an infra file, or a test, is clean; the path need not exist.
    for judged_as in ("app/infra/pool.py", "tests/test_x.py"):
        clean = run_corral("check", "--stdin-filename", judged_as, cwd=root, stdin=SPAWNING)
        assert (clean.returncode, clean.stdout) == (0, "All checks passed (1 file checked).\n"), judged_as


def test_stdin_uses_the_settings_of_its_path(project) -> None:
    root = project({
        "services/mail/pyproject.toml": "[tool.corral]\ninfra = ['mail/plumbing/**']\n",
        "services/mail/mail/plumbing/pool.py": "x = 1\n",
    })  # fmt: skip
    judged_as = "services/mail/mail/plumbing/pool.py"
    completed = run_corral("check", "-", "--stdin-filename", judged_as, cwd=root, stdin=SPAWNING)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    elsewhere = run_corral("check", "-", "--stdin-filename", "services/mail/mail/send.py", cwd=root, stdin=SPAWNING)
    assert elsewhere.returncode == 1
    # Judged in that project: JSON's path is relative to its root; text names the file from the working
    # directory, as for a file on disk.
    assert elsewhere.stdout.startswith("services/mail/mail/send.py:2:1: CRL101 ")
    as_json = run_corral(
        "check", "-", "--stdin-filename", "services/mail/mail/send.py", "--format", "json", cwd=root, stdin=SPAWNING
    )
    document = json.loads(as_json.stdout)
    assert document["root"] == str((root / "services" / "mail").resolve())
    assert [finding["path"] for finding in document["findings"]] == ["mail/send.py"]


def test_stdin_over_the_size_limit_is_uncheckable_not_read_whole(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nmax-file-size = 64\n"})
    completed = run_corral("check", "-", "--stdin-filename", "app/x.py", cwd=root, stdin="x = 1\n" * 100)
    assert completed.returncode == 1
    assert "app/x.py:1:1: CRL001 file is too large to check (over max-file-size = 64 bytes)" in completed.stdout
    fits = run_corral("check", "-", "--stdin-filename", "app/x.py", cwd=root, stdin="x = 1\n")
    assert fits.returncode == 0, fits.stdout


def test_stdin_with_a_configuration_error_exits_2(project) -> None:
    root = project({"pyproject.toml": "[tool.corral]\nnope = 1\n"})
    completed = run_corral("check", "-", "--stdin-filename", "a.py", cwd=root, stdin="x = 1\n")
    assert completed.returncode == 2
    assert "unknown key 'nope'" in completed.stderr


def test_statistics_counts_each_code_after_the_findings(project) -> None:
    root = project({"app/x.py": SPAWNING, "app/y.py": FORKING})
    completed = run_corral("check", "--statistics", cwd=root)
    assert completed.returncode == 1
    assert completed.stdout.splitlines()[3:] == [
        "1     CRL101 a thread started outside infra",
        "2     CRL102 a process forked or started outside infra",
        "Found 3 findings in 2 files (2 files checked).",
    ]
    (root / "app" / "x.py").write_text("x = 1\n")
    (root / "app" / "y.py").write_text("x = 1\n")
    clean = run_corral("check", "--statistics", cwd=root)
    assert (clean.returncode, clean.stdout) == (0, "All checks passed (2 files checked).\n")


def test_quiet_prints_the_findings_only(project) -> None:
    root = project({"app/x.py": SPAWNING})
    completed = run_corral("check", "-q", cwd=root)
    assert (completed.returncode, completed.stdout) == (1, f"app/x.py:2:1: CRL101 {MESSAGE}\n")
    (root / "app" / "x.py").write_text("x = 1\n")
    clean = run_corral("check", "--quiet", cwd=root)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        (["--color", "always"], {}, True),
        (["--color", "always"], {"NO_COLOR": "1"}, True),  # the flag is the user's choice for this run
        (["--color", "never"], {"FORCE_COLOR": "1"}, False),
        ([], {}, False),  # auto, and the output is a pipe
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ([], {"FORCE_COLOR": ""}, False),  # empty counts as unset
    ],
)
def test_color_choices_and_environment(project, args: list[str], env: dict[str, str], coloured: bool) -> None:
    root = project({"app/x.py": SPAWNING})
    completed = run_corral("check", *args, cwd=root, env=environment(**env))
    assert completed.returncode == 1
    assert (ANSI in completed.stdout) is coloured
    if coloured:
        assert completed.stdout.startswith(f"{ANSI}1mapp/x.py{ANSI}0m:2:1: {ANSI}1;31mCRL101{ANSI}0m ")


def test_color_never_touches_machine_formats(project) -> None:
    root = project({"app/x.py": SPAWNING})
    completed = run_corral("check", "--format", "json", "--color", "always", cwd=root)
    assert ANSI not in completed.stdout
    assert json.loads(completed.stdout)["findings"][0]["code"] == "CRL101"


def test_check_help_lists_the_exit_codes_and_the_report_pairing(tmp_path: Path) -> None:
    completed = run_corral("check", "--help", cwd=tmp_path, check=True)
    assert "exit codes:\n  0  no findings\n  1  findings" in completed.stdout
    assert "2  a usage, configuration or baseline error, or a report that could not be written" in completed.stdout
    assert "--format sarif -o corral.sarif" in completed.stdout


def test_every_option_of_every_command_has_help() -> None:
    from corral.gates.cli.main import _parser

    parser = _parser()
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, subparser in [("corral", parser), *commands.choices.items()]
        for action in subparser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    # worker and migrate are the runtime's own commands: their parsers (and help) are corral.runtime.cli's.
    assert missing == []


def test_stdin_is_matched_against_the_baseline_by_its_own_lines(project) -> None:
    root = project({"app/x.py": SPAWNING})
    run_corral("baseline", cwd=root, check=True)
    # The buffer moved the accepted line down: its fingerprint is read from the buffer, not from the disk.
    moved = "x = 1\n" + SPAWNING
    held = run_corral(
        "check", "-", "--stdin-filename", "app/x.py", "--baseline", "corral-baseline.json", cwd=root, stdin=moved
    )
    assert (held.returncode, held.stdout) == (0, "All checks passed (1 file checked).\n"), held.stderr
    # An edited offending line is a new finding, and the entry it replaced no longer occurs.
    edited = SPAWNING.replace("print", "len")
    new = run_corral(
        "check", "-", "--stdin-filename", "app/x.py", "--baseline", "corral-baseline.json", cwd=root, stdin=edited
    )
    assert new.returncode == 1
    assert new.stdout.startswith("app/x.py:2:1: CRL101 ")
    assert "fixed: app/x.py CRL101" in new.stderr


def test_a_terminal_gets_colour_unless_no_color(project) -> None:
    root = project({"app/x.py": SPAWNING})

    def on_a_terminal(**env: str) -> str:
        leader, follower = pty.openpty()
        try:
            subprocess.run(
                [sys.executable, "-m", "corral.gates", "check"],
                cwd=root,
                stdout=follower,
                stderr=subprocess.DEVNULL,
                env=environment(**env),
                timeout=120,
            )
            return os.read(leader, 65536).decode()
        finally:
            os.close(leader)
            os.close(follower)

    assert f"{ANSI}1;31mCRL101{ANSI}0m" in on_a_terminal()
    assert ANSI not in on_a_terminal(NO_COLOR="1")
    assert ANSI not in on_a_terminal(TERM="dumb")


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path: Path) -> None:
    # `corral rule --all | head -1`: the reader closed its end; no BrokenPipeError traceback.
    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before the first write: every write meets the closed pipe
    try:
        writer = subprocess.run(
            [sys.executable, "-m", "corral.gates", "rule", "--all"],
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in writer.stderr and "BrokenPipeError" not in writer.stderr, writer.stderr
    assert writer.returncode == 141
