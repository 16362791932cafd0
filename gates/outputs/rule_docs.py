"""Each code's documentation, from the one source the rule pages are generated from: the rule classes' codes
and summaries, their module and class docstrings and their VALID/INVALID examples.

`corral rule CODE` prints it, SARIF carries it as each rule's help, `ci/docs` renders the generated part of
`docs/rules/<family>.md` from it, and every output links a code to its place on that page with `docs_url`.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from dataclasses import dataclass

from corral.gates.findings import code_family

# Where the rule pages are published: the repository's docs/rules/ folder. Every link to a code's
# documentation (JSON `docs_url`, SARIF `helpUri`, `corral rule`) is built from this one base.
DOCS_BASE_URL = "https://github.com/corral/corral/blob/main/docs/rules/"
_EXPECTATION = re.compile(r"# error: \d+ (CRL\d+)\b")


# What each family is about, as code scanning tags it (SARIF `properties.tags`).
FAMILY_TOPICS = {
    "CRL0": "engine",
    "CRL1": "concurrency",
    "CRL2": "timeouts",
    "CRL3": "connection-budget",
    "CRL4": "transactions",
}


def docs_page(code: str) -> str:
    """The rule page of a code's family, relative to the docs/rules/ folder: `crl1.md`."""
    return f"{code_family(code).lower()}.md"


def docs_url(code: str) -> str:
    """Where a code is documented: its row of its family page's reference table (which holds its anchor)."""
    return f"{DOCS_BASE_URL}{docs_page(code)}#{code.lower()}"


@dataclass(frozen=True)
class RuleDoc:
    """What the documentation shows of one rule class (or of the engine, which reports CRL000 and CRL001)."""

    name: str
    module: str
    codes: dict[str, str]
    module_doc: str
    class_doc: str
    valid: tuple[str, ...]
    invalid: tuple[str, ...]

    def description(self) -> str:
        """The first paragraph of the rule's docstrings: what it finds."""
        return next((text.split("\n\n")[0] for text in (self.module_doc, self.class_doc) if text), "")

    def invalid_for(self, code: str) -> tuple[str, ...]:
        """The INVALID examples that show `code` failing: all of them when none names it."""
        shown = tuple(source for source in self.invalid if code in _EXPECTATION.findall(source))
        return shown or self.invalid


def rule_docs() -> list[RuleDoc]:
    """Every registered rule class as the documentation shows it, in registry order."""
    from corral.gates.rules import RULES

    return [
        RuleDoc(
            name=rule.__name__,
            module=rule.__module__,
            codes=dict(rule.codes),
            module_doc=inspect.cleandoc(sys.modules[rule.__module__].__doc__ or ""),
            # The class's own docstring only: an inherited one (the Rule base's) says nothing about this rule.
            class_doc=inspect.cleandoc(rule.__dict__.get("__doc__") or ""),
            valid=tuple(rule.VALID),
            invalid=tuple(rule.INVALID),
        )
        for rule in RULES
    ]


def engine_doc() -> RuleDoc:
    """The engine's own codes (CRL000, CRL001) as a rule's are shown."""
    from corral.gates.rules.base import EngineCodes

    return RuleDoc(
        name="the engine",
        module="corral.gates.engine.run",
        codes=dict(EngineCodes.codes),
        module_doc="",
        class_doc=inspect.cleandoc(EngineCodes.__doc__ or ""),
        valid=tuple(EngineCodes.VALID),
        invalid=tuple(EngineCodes.INVALID),
    )


def documented_codes() -> dict[str, RuleDoc]:
    """Every code, sorted, with the rule (or the engine) documenting it: the first of the registry for a code
    two rules report."""
    owners: dict[str, RuleDoc] = {}
    for doc in [engine_doc(), *rule_docs()]:
        for code in doc.codes:
            owners.setdefault(code, doc)
    return dict(sorted(owners.items()))


def example(source: str) -> str:
    """An example as a fenced Python block, exactly as its test runs it."""
    return "```python\n" + textwrap.dedent(source).strip("\n") + "\n```"


def code_documentation(code: str, doc: RuleDoc, *, markdown: bool) -> str:
    """A code's documentation: what it finds, why and how to fix it (the summary and the rule's docstrings
    say these), the examples that fail and pass, and its page. Plain text (`corral rule CODE`, SARIF's
    `help.text`) indents the examples; Markdown (SARIF's `help.markdown`) fences them."""
    if markdown:
        parts = [f"**{code}**: {doc.codes[code]}", f"Reported by `{doc.name}` (`{doc.module}`)."]
    else:
        parts = [f"{code}: {doc.codes[code]}", f"Reported by {doc.name} ({doc.module})."]
    parts += [text for text in (doc.module_doc, doc.class_doc) if text]
    for title, examples in (("Invalid", doc.invalid_for(code)), ("Valid", doc.valid)):
        if examples:
            parts.append(f"**{title}**" if markdown else f"{title}:")
            parts += [example(source) if markdown else _indented(source) for source in examples]
    parts.append(f"Documentation: {docs_url(code)}")
    return "\n\n".join(parts) + "\n"


def _indented(source: str) -> str:
    return textwrap.indent(textwrap.dedent(source).strip("\n"), "    ")
