"""CRL201-CRL204: every job kind has a hard timeout, provable statically as a positive number.

The kinds and their effective timeouts come from `corral.gates.frameworks` (one module per framework); this
rule turns failing kinds into findings on the declaring decorator or call, and records every kind as a
`JobKindFact`. Its project half, `corral.gates.rules.job_report`, reads the facts into the jobs report
(`corral jobs --static`, the json `jobs` section). Its codes, examples and prefilter words are the
frameworks' own, joined: a framework with a code of its own declares it beside its knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

from corral.gates.config import Config
from corral.gates.findings import Finding
from corral.gates.frameworks import FRAMEWORKS, job_kinds, might_use_wrappers
from corral.gates.frameworks.base import OTHER, UNRESOLVED
from corral.gates.rules.base import Rule, json_fields, record_fact
from corral.gates.source.prefilter import Source

# Every job kind is declared by a decorator or call whose name is written in the file: a method of an app,
# queue or broker (`.task`, `.job`...; the object may come from a project module), or a name imported from
# a framework. A framework whose settings and calls can be spelled in more ways than are worth looking for
# is `always_read`: a file importing it is always read. Built once from the frameworks' words.
_ALWAYS_READ = tuple(
    dict.fromkeys(package for each in FRAMEWORKS if each.words.always_read for package in each.words.packages)
)
_DECLARING_WORDS = tuple(dict.fromkeys(word for each in FRAMEWORKS for word in each.words.declaring))
_PACKAGES = tuple(
    dict.fromkeys(package for each in FRAMEWORKS if not each.words.always_read for package in each.words.packages)
)
_METHODS = tuple(dict.fromkeys(method for each in FRAMEWORKS for method in each.words.methods))
# The method names that hold no other one: a file naming a method names one of these.
_METHOD_WORDS = tuple(
    method.encode() for method in _METHODS if not any(other != method and other in method for other in _METHODS)
)
_METHOD_NAMES = re.compile(rb"(?:" + rb"|".join(re.escape(method.encode()) for method in _METHODS) + rb")\b")


def might_declare_jobs(source: Source) -> bool:
    """False only when no job kind can be declared in the file: the prefilter of every CRL2 rule."""
    if source.imports_any(*_ALWAYS_READ):
        return True
    declares = source.has(*_DECLARING_WORDS)
    if declares and (source.imports_any(*_PACKAGES) or (source.has(*_METHOD_WORDS) and _names_a_method(source.data))):
        return True
    # A decorator wrapping a framework's own in another project module (`walk.Finder` follows one only here).
    return source.holds(might_use_wrappers)


def _names_a_method(data: bytes) -> bool:
    """One of the method names right after a dot (`app.task`, also `app. task`, across a line break or a
    continuation, past a comment ending the line before)."""
    for match in _METHOD_NAMES.finditer(data):
        before = match.start() - 1
        while before >= 0:
            byte = data[before]
            if byte in b" \t\x0c\\\r":
                before -= 1
            elif byte == ord("\n"):
                line_start = data.rfind(b"\n", 0, before) + 1
                comment = data.find(b"#", line_start, before)
                before = (comment if comment != -1 else before) - 1
            else:
                break
        if before >= 0 and data[before] == ord("."):
            return True
    return False


class JobKindFact(NamedTuple):
    """One job kind as the jobs report shows it: its effective hard timeout in seconds (None: none
    proven), where that comes from, and the code it fails with (None when it passes)."""

    framework: str
    kind: str
    queue: str | None
    timeout: float | None
    source: str | None
    line: int
    function: str | None
    code: str | None

    @classmethod
    def fact_kind(cls) -> str:
        """What this record's facts are filed under in a file's facts and in the cache."""
        return "jobs"

    @classmethod
    def from_json(cls, data: Any) -> JobKindFact:
        return cls(**json_fields(cls, data))


class JobTimeouts(Rule):
    """The per-file half of CRL2's timeouts: a finding per failing job kind, a `JobKindFact` per kind."""

    NO_FRAMEWORK_LIMIT: ClassVar[str] = OTHER
    UNRESOLVED: ClassVar[str] = UNRESOLVED
    codes: ClassVar[dict[str, str]] = {
        **{framework.code: framework.summary for framework in FRAMEWORKS},
        UNRESOLVED: "a job or network timeout the gate cannot resolve statically",
    }

    VALID = tuple(example for framework in FRAMEWORKS for example in framework.VALID)
    INVALID = tuple(example for framework in FRAMEWORKS for example in framework.INVALID)

    @classmethod
    def might_match(cls, source: Source, config: Config) -> bool:
        return source.holds(might_declare_jobs)

    def check(self) -> Iterator[Finding]:
        context = self.context
        for kind in job_kinds(context):
            fact = JobKindFact(
                framework=kind.framework,
                kind=kind.name,
                queue=kind.queue,
                timeout=kind.timeout,
                source=kind.source,
                line=kind.node.lineno,
                function=kind.function.name if kind.function is not None else None,
                code=kind.code,
            )
            record_fact(fact, context)
            if kind.code is not None and kind.problem is not None:
                yield context.finding(kind.node, kind.code, kind.problem)
