"""The rule contract, and the codes the engine itself reports.

A rule is a small class: the codes it reports with a one-line summary each, a prefilter over the file's bytes
that rules out files which cannot hold one of its findings (`might_match`, asked of a shared `Source`), VALID
and INVALID examples beside it (a generic test turns them into test cases; INVALID lines carry
`# error: COL CODE "message fragment"`), and a `check` that yields findings.
Most rules are `ScopedVisitor`s: an `ast.NodeVisitor` that knows the scope of every node and never looks
inside type annotations or `if TYPE_CHECKING:` blocks, code that never runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from corral.gates.analysis.context import FileContext
from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.source.prefilter import Source

ENGINE_CODES: dict[str, str] = {
    "CRL000": "the configuration cannot be used",
    "CRL001": "a file cannot be read, decoded or parsed, so it cannot be checked",
}


class Rule:
    """Base of every per-file rule."""

    codes: ClassVar[dict[str, str]]
    # Domain rules do not judge infra (which exists to own such code) or tests.
    skips_infra: ClassVar[bool] = True
    skips_tests: ClassVar[bool] = True
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()

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
