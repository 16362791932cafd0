"""The generated parts of the documentation: one page per rule family, the configuration keys, the layers.

What the code already says (each rule's codes, summaries, docstrings and VALID/INVALID examples, the
`[tool.corral]` keys with their types and defaults, the import-linter layers) is rendered from the code, so
the pages cannot drift from it. Each generated page keeps its hand-written prose: only the text between
`<!-- generated: begin -->` and `<!-- generated: end -->` is rewritten.

Used by `ci/docs` (writes the pages, or `--check`s them) and by `tests/gates/test_docs.py` (fails on a stale
page); both put `ci/` on `sys.path`. It imports corral from the environment it runs in (`.venv/bin/python`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.gates.outputs.rule_docs import RuleDoc, engine_doc, example, rule_docs

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
BEGIN = "<!-- generated: begin -->"
END = "<!-- generated: end -->"
NOTICE = "<!-- This part is generated from the code by ci/docs: edit the code, then run ci/docs. -->"
# The rules' examples are shown exactly as their tests run them; `ruff format` (which formats Python blocks in
# Markdown) leaves a region between these alone.
FORMAT_OFF, FORMAT_ON = "<!-- fmt: off -->", "<!-- fmt: on -->"

# What each `[tool.corral]` key is for. The config declares each key's type and default but no description;
# a key the config gains without one here (or one listed here that the config lost) fails tests/gates/test_docs.py.
KEY_MEANINGS: dict[str, str] = {
    "infra": "code that may own threads, processes and tasks",
    "tests": "test code, exempt from the domain rules",
    "extend-spawners": 'more APIs to treat as spawners (CRL107), e.g. `"gevent.spawn"`',
    "extend-network": 'more APIs to treat as network calls (CRL210, CRL401), e.g. `"stripe.Charge.create"`: a call '
    'of one is a network call, and so is every method call of what it returns (`"pika.BlockingConnection"`, '
    "which connects when built)",
    "strict": "demand an explicit timeout on every job kind (CRL2)",
    "max-conns": "the database pool size, for deployments that set it outside code; unset: the code's; also the"
    " database's connection limit the Celery workers are checked against (CRL3)",
    "processes": "worker processes per deployment; multiplies the worker sum; set, it wins over the deployment"
    " files; unset: theirs, else 1 (CRL3)",
    "reserve": "share of the pool the workers may use (CRL3)",
    "kubernetes-manifests": "folders of Kubernetes manifests whose `replicas` count the worker processes (CRL3)",
    "select": "run only these rule families or codes (a phased roll-out); unset: all; CRL0 always runs",
    "baseline": "the baseline file `corral check` reads (`corral baseline` writes it): only new findings fail",
    "max-file-size": "a file larger than this many bytes is not read: CRL001 `too large to check`",
}


@dataclass(frozen=True)
class ConfigKey:
    """One `[tool.corral]` key: its name, the type its validation expects, and its default."""

    name: str
    expected: str
    default: Any


# -- the one place that reads the gate's APIs (adapt these two functions when they move) -----------------


def read_rules() -> tuple[dict[str, str], dict[str, str], list[RuleDoc]]:
    """Every code with its summary, the engine's own codes, and each registered rule class as
    `corral rule` shows it (the same source)."""
    from corral.gates.rules import CODES

    return dict(CODES), engine_doc().codes, rule_docs()


def read_config_keys() -> list[ConfigKey]:
    """The `[tool.corral]` keys as the config declares them, with the defaults a run uses when a key is unset."""
    from corral.gates.config import KEYS, Config

    defaults = Config._field_defaults
    return [ConfigKey(name, key.expected, defaults.get(key.attribute)) for name, key in KEYS.items()]


# -- rendering -----------------------------------------------------------------------------------------


def family_of(code: str) -> str:
    """`CRL101` -> `CRL1`: the family is the code's first digit."""
    return code[:4]


def family_page(family: str) -> Path:
    return DOCS / "rules" / f"{family.lower()}.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def render_family(family: str, codes: Mapping[str, str], engine_codes: Mapping[str, str], rules: list[RuleDoc]) -> str:
    """The generated part of one family's page: its codes, then each rule reporting them."""
    own = [rule for rule in rules if any(family_of(code) == family for code in rule.codes)]
    owner = {code: rule.name for rule in own for code in rule.codes}
    lines = ["## Reference", "", "| code | summary | reported by |", "| --- | --- | --- |"]
    for code, summary in sorted(codes.items()):
        if family_of(code) != family:
            continue
        if code in engine_codes:
            by = "the engine"
        elif code in owner:
            by = f"[`{owner[code]}`](#{anchor(owner[code])})"
        else:
            raise ValueError(f"{code} is in CODES but no rule in RULES reports it")
        # The anchor every output's link to the code (`docs_url`) points at.
        lines.append(f'| {code} | <a id="{code.lower()}"></a>{_cell(summary)} | {by} |')
    for rule in own:
        lines += ["", f"### {rule.name}", "", f"`{rule.module}` reports {', '.join(sorted(rule.codes))}."]
        for doc in (rule.module_doc, rule.class_doc):
            if doc:
                lines += ["", doc]
        for title, examples in (("Valid", rule.valid), ("Invalid", rule.invalid)):
            if examples:
                lines += ["", f"#### {title}"]
                for source in examples:
                    lines += ["", example(source)]
    return "\n".join(lines)


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`"


def render_config(keys: list[ConfigKey]) -> str:
    """The generated part of docs/configuration.md: every key with its type, default and meaning."""
    missing = [key.name for key in keys if key.name not in KEY_MEANINGS]
    unknown = sorted(set(KEY_MEANINGS) - {key.name for key in keys})
    if missing or unknown:
        raise ValueError(
            f"ci/docgen.py KEY_MEANINGS is out of step with corral.gates.config: keys without a meaning {missing}, "
            f"meanings of keys the config does not know {unknown}"
        )
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{key.name}` | {_cell(key.expected)} | {_cell(_toml(key.default))} | {_cell(KEY_MEANINGS[key.name])} |"
        for key in keys
    ]
    return "\n".join(lines)


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    with path.open("rb") as handle:
        document: dict[str, Any] = tomllib.load(handle)
        return document


def render_layers(pyproject: Path) -> str:
    """The generated part of docs/architecture.md: the import-linter contracts, each layer with what its
    module's docstring says it owns."""
    linter = _read_toml(pyproject)["tool"]["importlinter"]
    lines: list[str] = []
    for contract in linter["contracts"]:
        lines += [f"**{contract['name']}** (`{contract['type']}`)", ""]
        if contract["type"] == "layers":
            lines += ["| layer, top to bottom | what it owns |", "| --- | --- |"]
            for layer in contract["layers"]:
                doc = inspect.cleandoc(importlib.import_module(layer).__doc__ or "").split("\n\n")[0]
                lines.append(f"| `{layer}` | {_cell(doc)} |")
        else:
            sources = ", ".join(f"`{name}`" for name in contract["source_modules"])
            forbidden = ", ".join(f"`{name}`" for name in contract["forbidden_modules"])
            directly = " directly" if contract.get("allow_indirect_imports") else ""
            lines.append(f"{sources} may not import {forbidden}{directly}.")
            for allowed in contract.get("ignore_imports", ()):
                lines.append(f"Allowed: `{allowed}`.")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def generated_parts() -> dict[Path, str]:
    """Every generated page and the text its generated part should hold."""
    codes, engine_codes, rules = read_rules()
    parts = {
        family_page(family): render_family(family, codes, engine_codes, rules)
        for family in sorted({family_of(code) for code in codes})
    }
    parts[DOCS / "configuration.md"] = render_config(read_config_keys())
    parts[DOCS / "architecture.md"] = render_layers(REPO / "pyproject.toml")
    return parts


def fill(page: str, generated: str, where: Path) -> str:
    """The page with its generated part replaced; the prose around the markers is kept as it is."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{where}: no {BEGIN} ... {END} markers to write the generated part between")
    return f"{page[:start]}{BEGIN}\n{NOTICE}\n{FORMAT_OFF}\n\n{generated}\n\n{FORMAT_ON}\n{page[end:]}"


def expected_pages() -> dict[Path, str]:
    """Every generated page as it should read now. A page that does not exist yet starts as a bare title."""
    pages: dict[Path, str] = {}
    for path, generated in generated_parts().items():
        current = path.read_text("utf-8") if path.exists() else f"# {path.stem.upper()}\n\n{BEGIN}\n{END}\n"
        pages[path] = fill(current, generated, path)
    return pages


def stale_pages() -> list[Path]:
    """The generated pages whose file differs from what the code says now (or is missing)."""
    return [path for path, text in expected_pages().items() if not path.exists() or path.read_text("utf-8") != text]


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: ci/docs [--check]", file=sys.stderr)
        return 2
    if check:
        stale = stale_pages()
        for path in stale:
            print(f"{path.relative_to(REPO)} is stale: run ci/docs", file=sys.stderr)
        return 1 if stale else 0
    for path, text in expected_pages().items():
        if not path.exists() or path.read_text("utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    return 0
