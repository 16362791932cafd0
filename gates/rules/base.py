"""The contracts of the rules: the per-file `Rule`, the whole-project `ProjectCheck`, the typed `Fact`
records a rule keeps for its project half, the engine's own codes, and the builder of the code table.

A rule is a small class: the codes it reports with a one-line summary each (class attributes name the
codes, `codes` maps each to its summary; a code two rules report is declared by both, with the same
summary), a prefilter over the file's bytes that rules out files which cannot hold one of its findings
(`might_match`, asked of a shared `Source`), VALID and INVALID examples beside it (a generic test turns
them into test cases; INVALID lines carry `# error: COL CODE "message fragment"`; leading
`# corral-config: key = value` header lines are the settings the example is checked with), and a `check`
that yields findings.
Most rules are `ScopedVisitor`s: an `ast.NodeVisitor` that knows the scope of every node and never looks
inside type annotations or `if TYPE_CHECKING:` blocks, code that never runs.

A rule that needs the whole project (CRL2's jobs report, CRL3's connection budget) records `Fact`s per
file, cached with the file's result, and has a project half: a `ProjectCheck` that reads every file's
facts once all files are checked and reports under its rule's codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from corral.gates.analysis.context import FileContext
from corral.gates.findings import FactsByFile, Finding, code_family

if TYPE_CHECKING:
    from corral.gates.config import Config
    from corral.gates.source.prefilter import Source


class EngineCodes:
    """The codes no rule reports: the engine's (a file it cannot check) and its fronts' (settings they
    cannot use). Declared here, beside the rules' own, so that one table holds every code."""

    CONFIG_ERROR: ClassVar[str] = "CRL000"
    UNCHECKABLE: ClassVar[str] = "CRL001"
    codes: ClassVar[dict[str, str]] = {
        CONFIG_ERROR: "the configuration cannot be used",
        UNCHECKABLE: "a file cannot be read, decoded or parsed, so it cannot be checked",
    }

    # As a rule's: a file the engine checks, and files it cannot (the settings of the first are those of
    # the flake8 front, which reports settings it cannot use on every file; `corral check` stops instead).
    VALID: ClassVar[tuple[str, ...]] = (
        """
        import threading
        lock = threading.Lock()
        """,
    )
    INVALID: ClassVar[tuple[str, ...]] = (
        """
        # corral-config: strict = "yes"  # error: 1 CRL000 "strict"
        import threading
        """,
        """
        import threading
        def broken(:  # error: 12 CRL001 "invalid syntax"
            threading.Thread()
        """,
    )


class Rule:
    """Base of every per-file rule."""

    codes: ClassVar[dict[str, str]]
    # Domain rules do not judge infra (which exists to own such code) or tests.
    skips_infra: ClassVar[bool] = True
    skips_tests: ClassVar[bool] = True
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()
    # The project summaries (`modules.project_summary` names) the prefilter or the check reads: a run that
    # starts workers computes them once before, and every worker inherits them.
    summaries: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: FileContext) -> None:
        self.context = context

    @classmethod
    def applies_to(cls, *, is_infra: bool, is_test: bool) -> bool:
        return not (cls.skips_infra and is_infra) and not (cls.skips_tests and is_test)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        """The prefilter: False only when the file cannot hold one of this rule's findings, so its parse
        can be skipped. It must never be False for a file with a finding (a test holds every rule to that
        over the fixtures and a sweep of real code); cheap substring tests on rare words come first."""
        raise NotImplementedError

    def check(self) -> Iterator[Finding]:
        raise NotImplementedError

    @classmethod
    def family(cls) -> str:
        """The rule family of the codes this rule reports: one family per rule (the registry test holds
        every rule to that)."""
        return code_family(next(iter(cls.codes)))


AnyFact = TypeVar("AnyFact", bound="Fact")


class Fact(Protocol):
    """The typed records a rule keeps per file for its project half: each a NamedTuple (cheap to define:
    the `dataclasses` module alone would cost every cold run a few milliseconds) whose classmethod `fact_kind`
    names its records in a file's facts and in the cache, and whose `from_json` reads back
    `fact_to_json`'s form (fields by name, nested records as their own fields by name)."""

    @classmethod
    def fact_kind(cls) -> str: ...

    @classmethod
    def from_json(cls, data: Any) -> Fact: ...

    def _asdict(self) -> dict[str, Any]: ...


def record_fact(fact: Fact, context: FileContext) -> None:
    """Keep `fact` with the checked file's result."""
    context.add_fact(fact.fact_kind(), fact)


def fact_to_json(fact: Fact) -> dict[str, Any]:
    """A record's JSON form: its fields by name, nested records (and tuples of them) the same way."""
    return {name: _json_value(value) for name, value in fact._asdict().items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        asdict = getattr(value, "_asdict", None)
        if asdict is not None:
            return {name: _json_value(item) for name, item in asdict().items()}
        return [_json_value(item) for item in value]
    return value


def json_fields(cls: type, data: Any) -> dict[str, Any]:
    """`data` as a record's keyword arguments; TypeError when it is not a JSON object (a damaged cache)."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: not a JSON object")
    return data


def recorded(kind: type[AnyFact], facts_by_file: FactsByFile) -> Iterator[tuple[str, AnyFact]]:
    """Every record of type `kind` in the project, with the relative path of the file that holds it."""
    for relpath, facts in facts_by_file.items():
        for fact in facts.get(kind.fact_kind(), ()):
            if isinstance(fact, kind):
                yield relpath, fact


class ProjectCheck:
    """The whole-project half of a rule: it runs once every file is checked, on every file's facts, and
    reports under its rule's codes. `run` returns findings and may add a section to the reports (what
    `--format json` and the text summaries show beside the findings: "jobs", "budget")."""

    # The per-file rule that records the facts this check reads (and declares the codes it reports).
    rule: ClassVar[type[Rule]]
    fact: ClassVar[type[Fact]]

    def run(self, facts_by_file: FactsByFile, config: Config, reports: dict[str, Any]) -> list[Finding]:
        raise NotImplementedError


def code_table(declarations: Iterable[type[EngineCodes] | type[Rule]]) -> dict[str, str]:
    """Every declared code with its summary, in declaration order. A code declared by more than one rule
    must carry one summary everywhere; anything else is a mistake in the declarations."""
    table: dict[str, str] = {}
    declared_by: dict[str, str] = {}
    for declaration in declarations:
        for code, summary in declaration.codes.items():
            known = table.setdefault(code, summary)
            if known != summary:
                raise ValueError(
                    f"{code} is declared by {declared_by[code]} as {known!r} and by {declaration.__name__} "
                    f"as {summary!r}: a shared code has one summary"
                )
            declared_by.setdefault(code, declaration.__name__)
    return table
