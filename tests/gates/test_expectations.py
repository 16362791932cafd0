"""The fixtures' own reader and comparator: a wrong column, code or message fragment fails, and so does a
marker or an option the reader cannot use."""

from __future__ import annotations

import pytest
from corral.gates.engine.run import check_source
from corral.gates.findings import Finding
from expectations import Expected, mismatches, read_expectations

FIXTURE = """\
import asyncio
import threading
from asyncio import create_task, ensure_future  # error: 21 CRL104 "asyncio.create_task", 34 CRL104 "ensure_future"
threading.Thread(target=print)  # error: 1 CRL101 "threading.Thread"
"""


def compare(source: str, variant: str | None = None) -> list[str]:
    expectations = read_expectations(source)
    result = check_source("app/module.py", source.encode(), expectations.config(variant))
    return mismatches(result.findings, expectations.findings(variant))


def test_the_right_columns_codes_and_fragments_match() -> None:
    assert compare(FIXTURE) == []


@pytest.mark.parametrize(
    ("right", "wrong"),
    [
        ('1 CRL101 "threading.Thread"', '2 CRL101 "threading.Thread"'),  # column
        ('1 CRL101 "threading.Thread"', '1 CRL101 "threading.Timer"'),  # message fragment
        ('1 CRL101 "threading.Thread"', '1 CRL102 "threading.Thread"'),  # code
        ('34 CRL104 "ensure_future"', '21 CRL104 "ensure_future"'),  # the column of another finding on the line
    ],
    ids=["column", "fragment", "code", "neighbour's-column"],
)
def test_a_wrong_expectation_fails(right: str, wrong: str) -> None:
    problems = compare(FIXTURE.replace(right, wrong))
    assert any(problem.startswith("expected, not reported:") for problem in problems), problems
    assert any(problem.startswith("reported, not expected:") for problem in problems), problems


def test_a_finding_without_an_expectation_fails() -> None:
    source = FIXTURE.replace(', 34 CRL104 "ensure_future"', "")
    assert compare(source) == [
        "reported, not expected: 3:34 CRL104 'asyncio.ensure_future outside infra; "
        "enqueue a job or call an infra helper instead'"
    ]


def test_each_expectation_accounts_for_one_finding() -> None:
    finding = Finding("app/a.py", 3, 5, "CRL101", "threading.Thread outside infra")
    twice = [Expected(3, 5, "CRL101", "threading"), Expected(3, 5, "CRL101", "Thread")]
    assert mismatches([finding], twice) == ['expected, not reported: 3:5 CRL101 "threading"']
    assert mismatches([finding, finding._replace(message="threading.Timer outside infra")], twice) == []


def test_the_order_of_expectations_never_decides() -> None:
    # The looser fragment comes first; a greedy match would give it the only finding the stricter one accepts.
    findings = [
        Finding("app/a.py", 1, 1, "CRL104", "asyncio.create_task outside infra"),
        Finding("app/a.py", 1, 1, "CRL104", "asyncio.ensure_future outside infra"),
    ]
    expected = [Expected(1, 1, "CRL104", "asyncio."), Expected(1, 1, "CRL104", "create_task")]
    assert mismatches(findings, expected) == []
    assert mismatches(reversed(findings), reversed(expected)) == []


@pytest.mark.parametrize(
    ("marker", "reason"),
    [
        ("# error: CRL101", "expected `# error: COL CODE"),
        ('# error: CRL101 "threading.Thread"', "expected `# error: COL CODE"),
        ("# error: 1 CRL101", "expected `# error: COL CODE"),
        ('# error: 1 CRL101 "threading.Thread" CRL104', "unexpected 'CRL104'"),
        ('# error: 1 CRL101 "threading.Thread",', "expected `# error: COL CODE"),
        ('# error[strict]: 1 CRL101 "threading.Thread"', "names a variant no"),
    ],
    ids=["old-form", "no-column", "no-fragment", "trailing", "dangling-comma", "undeclared-variant"],
)
def test_a_malformed_marker_is_an_error(marker: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        read_expectations(f"import threading\nthreading.Thread(target=print)  {marker}\n")


def test_a_marker_may_be_followed_by_another_comment() -> None:
    expectations = read_expectations('x = 1  # error: 1 CRL101 "threading.Thread"  # noqa: F821\n')
    assert expectations.findings() == [Expected(1, 1, "CRL101", "threading.Thread")]


STRICT = """\
# Frameworks' defaults: only strict mode rejects them.
# corral-config[strict]: strict = true
from rq.decorators import job
@job("default")  # error[strict]: 2 CRL203 "the rq default is 180 s"
def crawl(url): ...
@job("low", timeout=0)  # error: 2 CRL203 "rq: timeout=0 is an error RQ refuses at enqueue"
def sweep(url): ...
"""


def test_a_variant_runs_with_its_options_and_adds_its_findings() -> None:
    expectations = read_expectations(STRICT)
    assert expectations.variants == [None, "strict"]
    assert not expectations.config().strict and expectations.config("strict").strict
    assert [want.line for want in expectations.findings()] == [6]
    assert [want.line for want in expectations.findings("strict")] == [6, 4]
    assert compare(STRICT) == []
    assert compare(STRICT, "strict") == []
    # The variant's options are what make its findings: without them, its expectations go unmet.
    assert compare(STRICT.replace("strict = true", "strict = false"), "strict") == [
        'expected, not reported: 4:2 CRL203 "the rq default is 180 s"'
    ]


def test_plain_options_apply_to_every_run() -> None:
    source = (
        '# corral-config: extend-spawners = ["gevent.spawn"]\n'
        "import gevent\n"
        'gevent.spawn(print)  # error: 1 CRL107 "gevent.spawn"\n'
    )
    assert read_expectations(source).config().extend_spawners == ("gevent.spawn",)
    assert compare(source) == []
    assert compare(source.replace('# corral-config: extend-spawners = ["gevent.spawn"]\n', "# (no options)\n"))


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import os\n# corral-config: strict = true\n", "belongs in the comments that open the file"),
        ("x = 1  # corral-config: strict = true\n", "belongs in the comments that open the file"),
        ("# corral-config: strict = yes\n", "is not TOML"),
    ],
    ids=["below-the-header", "after-code", "not-toml"],
)
def test_a_misplaced_or_malformed_option_is_an_error(source: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        read_expectations(source)


def test_an_unknown_option_is_the_gates_config_error() -> None:
    from corral.gates.config import ConfigError

    with pytest.raises(ConfigError, match="stric"):
        read_expectations("# corral-config: stric = true\n").config()
