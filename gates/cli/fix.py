"""`corral fix --add-timeouts SECONDS [PATH...]`: give failing job declarations a limit, for the frameworks
that name the keyword to set (`Framework.fix_keyword`).

What to touch is decided by the CRL2 findings themselves (a framework's own code, on its declaring
decorator), so the fix never disagrees with the gate: a declaration that passes is never touched, and a
second run finds nothing left to do. The rewrite is libcst's, so formatting and comments are kept: the
keyword is added to the declaring call (a bare `@x.task` becomes `@x.task(keyword=N)`), or its
`None`/zero/negative value replaced. CRL204 (a value the gate cannot read) is left alone: only its author
knows what was meant.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from corral.gates.frameworks import FRAMEWORKS
from libcst.metadata import MetadataWrapper, PositionProvider

# The keyword to set, by the code of the findings it fixes.
KEYWORDS = {framework.code: framework.fix_keyword for framework in FRAMEWORKS if framework.fix_keyword is not None}


def fix_source(source: str, targets: dict[tuple[int, int], str], seconds: float) -> str:
    """`source` with `keyword=seconds` set on the decorator expressions starting at `targets`
    ((line, 1-based column) -> keyword)."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    fixed = wrapper.visit(_AddLimit(targets, _literal(seconds)))
    return fixed.code


class _AddLimit(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, targets: dict[tuple[int, int], str], value: str) -> None:
        super().__init__()
        self.targets = targets
        self.value = value

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        start = self.get_metadata(PositionProvider, original_node.decorator).start
        keyword = self.targets.get((start.line, start.column + 1))
        if keyword is None:
            return updated_node
        expression = updated_node.decorator
        if not isinstance(expression, cst.Call):
            expression = cst.Call(func=expression)
        return updated_node.with_changes(decorator=self._with_keyword(expression, keyword))

    def _with_keyword(self, call: cst.Call, keyword: str) -> cst.Call:
        value = cst.parse_expression(self.value)
        for index, argument in enumerate(call.args):
            if argument.keyword is not None and argument.keyword.value == keyword:
                args = list(call.args)
                args[index] = argument.with_changes(value=value)
                return call.with_changes(args=args)
        added = cst.Arg(
            keyword=cst.Name(keyword),
            value=value,
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
        if not call.args:
            return call.with_changes(args=[added])
        args = list(call.args)
        last = args[-1]
        inner = call.whitespace_before_args
        if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
            inner = args[-2].comma.whitespace_after
        trailing = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        if isinstance(last.comma, cst.Comma) and isinstance(trailing, cst.ParenthesizedWhitespace):
            # One argument per line with a trailing comma: the new argument goes on its own line, indented
            # like the others; the last argument keeps its comment, and the closing parenthesis its place.
            indent = inner.last_line if isinstance(inner, cst.ParenthesizedWhitespace) else trailing.last_line
            on_its_line = trailing.with_changes(last_line=indent)
            args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=on_its_line))
            closing = cst.ParenthesizedWhitespace(indent=trailing.indent, last_line=trailing.last_line)
            args.append(added.with_changes(comma=cst.Comma(whitespace_after=closing)))
        elif isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):
            # One argument per line without a trailing comma: the same, and still no trailing comma.
            before_closing = last.whitespace_after_arg
            indent = inner.last_line if isinstance(inner, cst.ParenthesizedWhitespace) else before_closing.last_line
            on_its_line = before_closing.with_changes(last_line=indent)
            args[-1] = last.with_changes(
                comma=cst.Comma(whitespace_after=on_its_line), whitespace_after_arg=cst.SimpleWhitespace("")
            )
            args.append(
                added.with_changes(
                    whitespace_after_arg=cst.ParenthesizedWhitespace(
                        indent=before_closing.indent, last_line=before_closing.last_line
                    )
                )
            )
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(added)
        return call.with_changes(args=args)


def _literal(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else repr(seconds)


def fix_command(paths: Sequence[str], config_file: str | None, *, seconds: float) -> int:
    """Rewrite every failing declaration under `paths`; print what changed. 0, or 2 on an error."""
    import os

    from corral.gates.config import Config, ConfigError
    from corral.gates.engine.projects import find_projects
    from corral.gates.engine.run import check_source, relative_path
    from corral.gates.source.parsing import Uncheckable, decode, read_source

    projects = find_projects(paths, config_file)
    for project in projects:  # before any file is touched: every file's settings must be usable
        if isinstance(project.settings, ConfigError):
            raise project.settings
    # Each file with the settings of its own project, as `corral check` judges it.
    judged = [(project.settings, path) for project in projects for path in sorted(project.files)]
    changed = 0
    for config, path in judged:
        assert isinstance(config, Config)  # every ConfigError was raised above
        relpath = relative_path(path, config.root)
        try:
            data = read_source(path, config.max_file_size)
            text = decode(data)
        except (OSError, Uncheckable):
            continue  # `corral check` reports it (CRL001); there is nothing to fix in it
        targets = {
            (finding.line, finding.col): KEYWORDS[finding.code]
            for finding in check_source(relpath, data, config).findings
            if finding.code in KEYWORDS
        }
        if not targets:
            continue
        fixed = fix_source(text, targets, seconds)
        if fixed != text:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(fixed)
            changed += 1
            declarations = f"{len(targets)} declaration{'s' if len(targets) != 1 else ''}"
            print(f"{os.path.relpath(path)}: {declarations} given a limit")
    print(f"Fixed {changed} file{'s' if changed != 1 else ''}.")
    return 0
