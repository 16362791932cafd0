"""Running one call with recursion headroom: a thread with a deep stack and a raised, bounded recursion limit.

A valid file nested deeper than the default recursion limit lets the gate's walks go (a long `if/elif`
chain, a `a + a + ...` of a thousand terms) is checked again here rather than reported as uncheckable: the
gate checks every file the running Python can compile.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")

# Python compiles nesting up to about three times its recursion limit, and the gate's walks take up to seven
# frames a level (measured on 3.11: a 2,900-branch elif chain, near the most it compiles, needs 10,000 to
# 20,000), so forty times the limit covers every file it compiles.
HEADROOM = 40
# Reserved, not committed: the pages a walk never reaches are never touched. Measured on 3.11, 16 MiB run
# 40,000 frames; the margin is for Pythons whose frames use the machine stack (3.10).
STACK_BYTES = 256 * 1024 * 1024


class NoDeepStack(Exception):
    """The platform would not give a thread the deeper stack."""


def call_with_headroom(function: Callable[[], Result]) -> Result:
    """`function()` on a thread with a `STACK_BYTES` stack and `HEADROOM` times the recursion limit; its
    exception, if any, is raised here. The caller waits, so no other code of this process runs meanwhile
    with the raised limit."""
    outcome: list[Result] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(function())
        except BaseException as error:  # handed to the caller, whatever it is
            failure.append(error)

    limit = sys.getrecursionlimit()
    try:
        previous_stack = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError) as error:
        raise NoDeepStack(str(error)) from None
    try:
        thread = threading.Thread(target=run, name="corral-deep-stack", daemon=True)
        sys.setrecursionlimit(limit * HEADROOM)
        try:
            thread.start()
            thread.join()
        except RuntimeError as error:  # the thread could not be started (no memory for its stack)
            raise NoDeepStack(str(error)) from None
        finally:
            sys.setrecursionlimit(limit)
    finally:
        threading.stack_size(previous_stack)
    if failure:
        raise failure[0]
    return outcome[0]
