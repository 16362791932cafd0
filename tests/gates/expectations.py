"""Expected findings and per-fixture options, written in the fixture itself; and the comparison with the gate's.

Modelled on flake8-async's `tests/eval_files/`. A finding is expected on the line it is reported on:

    threading.Thread(target=work)  # error: 1 CRL101 "threading.Thread"
    from asyncio import create_task, ensure_future  # error: 21 CRL104 "create_task", 34 CRL104 "ensure_future"

Each expectation is `COL CODE "fragment"`: the 1-based column the finding reports, its code, and a piece
of its message (a substring, without double quotes: the part that names the API or the value, not a word
every message of the code shares). One marker lists every finding of its line, comma-separated; a line
that reports the same code twice carries two expectations. The old form without a column and a fragment
(`# error: CRL101`) is rejected: a wrong column or a wrong message must fail a test, so every expectation
carries both.

Options sit in a header, the comment lines that open the file, in TOML (the `[tool.corral]` keys):

    # corral-config: extend-spawners = ["gevent.spawn"]
    # corral-config[strict]: strict = true

A plain `corral-config` line applies to every run of the fixture. A bracketed one declares a variant,
a further run whose settings are layered over the plain ones; `# error[strict]: ...` marks the findings
that only that variant reports, on top of the fixture's `# error:` ones (a variant adds findings, it
never removes one). A `corral-config` line below the header, or a marker naming an undeclared variant,
is an error: an option or an expectation that silently did nothing would let a test pass.
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from corral.gates.config import Config, config_from_table
from corral.gates.findings import Finding

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Every configuration anchors its globs here; fixtures are checked under app/, as domain code.
ROOT = Path("/project")

MARKER = re.compile(r"#\s*error(?:\[(?P<variant>[\w-]+)\])?:")
EXPECTATION = re.compile(r'\s*(?P<col>\d+)\s+(?P<code>CRL\d{3})\s+"(?P<fragment>[^"]+)"')
OPTION = re.compile(r"#\s*corral-config(?:\[(?P<variant>[\w-]+)\])?:(?P<toml>.*)")
FORM = '`# error: COL CODE "message fragment"` (several comma-separated)'


class Expected(NamedTuple):
    """One finding a fixture expects: where, which code, and a piece of its message."""

    line: int
    col: int
    code: str
    fragment: str

    def accepts(self, finding: Finding) -> bool:
        where = (finding.line, finding.col, finding.code) == (self.line, self.col, self.code)
        return where and self.fragment in finding.message

    def __str__(self) -> str:
        return f'{self.line}:{self.col} {self.code} "{self.fragment}"'


class Expectations(NamedTuple):
    """What a fixture declares: its options (plain and per variant) and the findings each run expects."""

    options: dict[str, Any]
    variant_options: dict[str, dict[str, Any]]
    common: tuple[Expected, ...]
    per_variant: dict[str, tuple[Expected, ...]]

    @property
    def variants(self) -> list[str | None]:
        """Every run the fixture asks for: None (its plain options), then each declared variant."""
        return [None, *sorted(self.variant_options)]

    def config(self, variant: str | None = None) -> Config:
        table = {**self.options, **(self.variant_options[variant] if variant else {})}
        return config_from_table(table, root=ROOT, source=None)

    def findings(self, variant: str | None = None) -> list[Expected]:
        return [*self.common, *(self.per_variant.get(variant, ()) if variant else ())]

    def __bool__(self) -> bool:
        return bool(self.common) or any(self.per_variant.values())


def read_expectations(source: str) -> Expectations:
    """Parse a fixture's header and `# error:` markers; a malformed one is a ValueError naming its line."""
    option_lines: dict[str | None, list[str]] = {}
    marked: dict[str | None, list[Expected]] = {}
    in_header = True
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        option = OPTION.search(line)
        if option:
            if not (in_header and stripped.startswith("#")):
                raise ValueError(f"line {number}: `corral-config` belongs in the comments that open the file")
            option_lines.setdefault(option["variant"], []).append(option["toml"])
        elif stripped and not stripped.startswith("#"):
            in_header = False
        for marker in MARKER.finditer(line):
            marked.setdefault(marker["variant"], []).extend(_parse_marker(line, marker.end(), number))
    options = {variant: _parse_toml(lines, variant) for variant, lines in option_lines.items()}
    undeclared = sorted(variant for variant in marked if variant is not None and variant not in options)
    if undeclared:
        raise ValueError(f"`# error[{undeclared[0]}]:` names a variant no `# corral-config[...]:` header declares")
    return Expectations(
        options=options.pop(None, {}),
        variant_options={variant: table for variant, table in options.items() if variant is not None},
        common=tuple(marked.pop(None, [])),
        per_variant={variant: tuple(found) for variant, found in marked.items() if variant is not None},
    )


def _parse_marker(line: str, start: int, number: int) -> list[Expected]:
    found = []
    position = start
    while True:
        match = EXPECTATION.match(line, position)
        if match is None:
            raise ValueError(f"line {number}: expected {FORM} after `error:`, got {line[start:].strip()!r}")
        found.append(Expected(number, int(match["col"]), match["code"], match["fragment"]))
        rest = line[match.end() :].lstrip()
        if not rest.startswith(","):
            break
        position = len(line) - len(rest) + 1
    if rest and not rest.startswith("#"):
        raise ValueError(f"line {number}: unexpected {rest!r} after the expectations; write {FORM}")
    return found


def _parse_toml(lines: list[str], variant: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError as error:
        name = f"corral-config[{variant}]" if variant else "corral-config"
        raise ValueError(f"`{name}:` is not TOML: {error}") from None


def mismatches(findings: Iterable[Finding], expected: Iterable[Expected]) -> list[str]:
    """What keeps the findings from being exactly the expected ones: each expectation must account for one
    finding of its own. Empty when they match."""
    reported = sorted(findings, key=lambda finding: (finding.line, finding.col, finding.code, finding.message))
    wanted = sorted(expected)
    accepted_by = [[index for index, finding in enumerate(reported) if want.accepts(finding)] for want in wanted]
    owner: dict[int, int] = {}  # finding index -> the expectation accounting for it

    def place(want: int, tried: set[int]) -> bool:
        # A matching in a bipartite graph (Kuhn): an expectation may take a finding from another that has a
        # second choice, so the order of the markers never decides whether a fixture passes.
        for index in accepted_by[want]:
            if index not in tried:
                tried.add(index)
                if index not in owner or place(owner[index], tried):
                    owner[index] = want
                    return True
        return False

    unmet = [want for want in range(len(wanted)) if not place(want, set())]
    return [
        *(f"expected, not reported: {wanted[want]}" for want in unmet),
        *(
            f"reported, not expected: {finding.line}:{finding.col} {finding.code} {finding.message!r}"
            for index, finding in enumerate(reported)
            if index not in owner
        ),
    ]


def example_source(example: str) -> str:
    return textwrap.dedent(example).lstrip("\n")


def rule_fixture_folders() -> list[Path]:
    """The fixture folders whose files mark expected findings with `# error:` comments. The fixture projects
    (`crl*_projects/NAME`) are not among them: each is checked as a project of its own, rooted at its folder."""
    return sorted(
        folder
        for folder in FIXTURES.iterdir()
        if folder.is_dir()
        and not folder.name.endswith(PROJECTS_SUFFIX)
        and any(read_expectations(file.read_text("utf-8", "replace")) for file in folder.rglob("*.py"))
    )


PROJECTS_SUFFIX = "_projects"


def assert_matches(findings: Iterable[Finding], expected: Iterable[Expected], where: object = "") -> None:
    """Fail with every mismatch, one a line (pytest's own diff of two lists would cut them short)."""
    problems = mismatches(findings, expected)
    assert not problems, f"{where}\n" + "\n".join(problems)
