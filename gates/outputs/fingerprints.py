"""The fingerprint of a finding that survives moving code: a hash of the offending line's text with whitespace
collapsed, and the finding's occurrence among those of its file with the same code and line text (in line
order). The baseline keys its entries by it and SARIF gives it as each result's partial fingerprint, so both
follow a finding across line moves and re-indentation, and lose it when the line itself is edited."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from corral.gates.findings import Finding


class Fingerprinted(NamedTuple):
    """A finding with its fingerprint, its occurrence index and the offending line's normalised text."""

    finding: Finding
    fingerprint: str
    occurrence: int
    text: str


def _lines_of(path: Path, max_bytes: int, given: bytes | None) -> list[str]:
    """The lines of the file at `path`, or of its source `given` in memory (read from stdin)."""
    from corral.gates.source.parsing import Uncheckable, decode, read_source, source_lines

    try:
        text = decode(read_source(str(path), max_bytes) if given is None else given)
    except (OSError, Uncheckable):
        return []  # the finding says why the file cannot be read; its line text is then empty
    return source_lines(text)


def fingerprinted(
    findings: Iterable[Finding], root: Path, max_bytes: int, sources: Mapping[str, bytes] | None = None
) -> list[Fingerprinted]:
    """Every finding, sorted, with its fingerprint; each file (under `root`) is read once, never more than
    `max_bytes` of it (the run's `max-file-size`). `sources` (relative path to the source checked, as read
    from stdin) gives the text of the files it holds: a finding is matched by the lines that were checked."""
    lines: dict[str, list[str]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    marked = []
    for finding in sorted(findings, key=lambda f: (f.path, f.line, f.col, f.code, f.message)):
        if finding.path not in lines:
            lines[finding.path] = _lines_of(root / finding.path, max_bytes, (sources or {}).get(finding.path))
        file_lines = lines[finding.path]
        text = " ".join(file_lines[finding.line - 1].split()) if 0 < finding.line <= len(file_lines) else ""
        fingerprint = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        group = (finding.path, finding.code, fingerprint)
        occurrence = seen.get(group, 0)
        seen[group] = occurrence + 1
        marked.append(Fingerprinted(finding, fingerprint, occurrence, text))
    return marked
