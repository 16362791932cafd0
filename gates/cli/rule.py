"""`corral rule`: a code's documentation (what it finds, why, how to fix it, its examples, its page), from the
same source as the rule pages; a family's codes, every code (`--all`), or the list of codes and summaries."""

from __future__ import annotations

import sys

from corral.gates.outputs.rule_docs import code_documentation, docs_url, documented_codes


def rule_command(selector: str | None, *, every: bool) -> int:
    """Print the documentation of the code or family `selector` names (in any case), of every code with
    `every`, or one line per code when neither is given. 0, or 2 for a selector that names no code."""
    owners = documented_codes()
    if selector is None and not every:
        width = max(len(code) for code in owners)
        rows = [f"{code:<{width}}  {doc.codes[code]}  {docs_url(code)}\n" for code, doc in owners.items()]
        sys.stdout.write("".join(rows))
        return 0
    wanted = (selector or "").strip().upper()
    shown = [code for code in owners if every or code == wanted or (len(wanted) == 4 and code.startswith(wanted))]
    if not shown:
        import difflib

        # A code cut short (CRL10) is nearest the codes it starts; a mistyped one, the codes spelled alike.
        near = [code for code in owners if code.startswith(wanted)][:3] or difflib.get_close_matches(
            wanted, list(owners), n=3, cutoff=0.6
        )
        hint = f"; did you mean {', '.join(near)}?" if near else "; `corral rule` lists every code"
        print(f"corral rule: no rule code or family {selector!r}{hint}", file=sys.stderr)
        return 2
    sys.stdout.write("\n".join(code_documentation(code, owners[code], markdown=False) for code in shown))
    return 0
