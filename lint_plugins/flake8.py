"""The flake8 front: `CorralChecker`, registered under flake8's `flake8.extension` entry point as `CRL`.

A thin adapter over the engine. flake8 hands over the tree it already parsed and the file's lines; the
engine's per-file rules judge them with the `[tool.corral]` settings `corral check` would use for that file,
with the same project-relative path, so the editor shows what CI will; settings it cannot use are the
engine's CRL000 finding. Whole-project checks (`rules.PROJECT_CHECKS`) need every file at once and are not
run here.

Where `corral check` has left a cache for the same settings and the same corral, a file whose bytes are the
ones it checked is answered with its stored result, once every dependency the result records still holds
(a project summary among them is computed again, once per flake8 process, to say so): the result a fresh
check would give, without following its calls again. Any other file is checked here. The plugin never
writes the cache.
"""

from __future__ import annotations

import ast
import io
import os
import tokenize
from collections.abc import Iterator
from functools import cache

from corral.gates.config import Config, ConfigError, load_config
from corral.gates.engine.cache import Cache
from corral.gates.engine.run import check_source, relative_path, unusable_config
from corral.gates.findings import Finding

Report = tuple[int, int, str, type]


@cache
def _config_for(directory: str) -> Config | ConfigError:
    """The settings for files in `directory` (flake8 does not read pyproject.toml, so corral does)."""
    try:
        return load_config([directory])
    except ConfigError as error:
        return error


@cache
def _cache_for(config: Config) -> Cache:
    """The results `corral check` stored for these settings, read once per flake8 process."""
    return Cache.open(config)


def _findings(relpath: str, data: bytes, config: Config, tree: ast.Module) -> tuple[Finding, ...]:
    """The file's findings: its stored result while that still holds, else a check of the file."""
    results = _cache_for(config)
    if len(results):
        served = results.lookup(relpath, results.key(relpath, data))
        if served is not None:
            return served.findings
    return check_source(relpath, data, config, tree=tree).findings


def _source_bytes(lines: list[str]) -> bytes:
    """The file's bytes back from flake8's decoded lines, for the engine's prefilter and decoding."""
    text = "".join(lines)
    if text.isascii():
        return text.encode("ascii")
    # The engine decodes by the coding declaration, as Python does: encode back into that encoding, or a
    # cp1252 file's text re-encoded as UTF-8 could hold bytes cp1252 cannot decode.
    head = "".join(lines[:2]).encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
        return text.encode(encoding)
    except (SyntaxError, UnicodeError):
        # flake8 fell back to reading the file as latin-1; the engine reads the declaration itself and
        # reports what is wrong with it (CRL001), as `corral check` does.
        return text.encode("utf-8", "surrogatepass")


class CorralChecker:
    """corral's per-file rules inside flake8; codes and messages are `corral check`'s."""

    def __init__(self, tree: ast.Module, filename: str, lines: list[str]) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Report]:
        path = os.path.realpath(self.filename)
        config = _config_for(os.path.dirname(path))
        if isinstance(config, ConfigError):
            findings: tuple[Finding, ...] = (unusable_config(self.filename, config),)
        else:
            relpath = relative_path(path, config.root)
            findings = _findings(relpath, _source_bytes(self.lines), config, self.tree)
        for finding in findings:
            # flake8 takes 0-based columns and adds the 1 back when it prints them; corral's count characters,
            # as flake8's own pycodestyle checks and ruff do (pyflakes' F codes count UTF-8 bytes).
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)
