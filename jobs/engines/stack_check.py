"""A stack's interpreter, checked where the batch runs (docs/contracts.md "Stacks"): it exists, is
executable and runs with the stack's environment. One that does not is bad input (exit 2,
StackError) naming the stacks file's line: the host's file says something false, unlike an
engine setting that cannot start its engine (EngineError, exit 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess

from jobs.core.stacks import StackSpec
from jobs.errors import StackError

CHECK_S = 60.0  # an interpreter that cannot print its own version in this time does not run
_checked: set[tuple[str, ...]] = set()


def check_stack(stack: StackSpec) -> None:
    """Refuse (StackError) a stack whose interpreter does not run; each stack checked once per
    process while it passes."""
    key = (stack.python, *sorted(f"{k}={v}" for k, v in stack.env.items()))
    if key in _checked:
        return
    found = shutil.which(stack.python) if os.sep not in stack.python else stack.python
    head = f"{stack.where}: stack {stack.name!r}: python {stack.python}"
    if not found or not os.path.isfile(found):
        raise StackError(f"{head}: no such interpreter")
    if not os.access(found, os.X_OK):
        raise StackError(f"{head}: not executable")
    try:
        done = subprocess.run(
            [found, "-c", "import sys; print(sys.version_info[0])"], capture_output=True,
            text=True, timeout=CHECK_S, stdin=subprocess.DEVNULL,
            env={**os.environ, **stack.env})
    except subprocess.TimeoutExpired:
        raise StackError(f"{head} does not run: no answer in {CHECK_S:g} s") from None
    except OSError as exc:
        raise StackError(f"{head} does not run: {exc.strerror or exc}") from None
    if done.returncode != 0 or done.stdout.strip() != "3":
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise StackError(f"{head} does not run: {last[:200]}")
    _checked.add(key)
