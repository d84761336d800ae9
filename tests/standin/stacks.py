"""A GPU host with several engine environments side by side, for tests (docs/contracts.md
"Stacks"): each stack's interpreter is a wrapper of this Python with the stand-ins first on its
path, playing one release (STANDIN_VERSION) at one speed (STANDIN_SPEED), as a venv per release
is on a real host; a stack may also see a torch of its own (a `torch/version.py` on its path,
as the fingerprint probe reads it without importing torch).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.standin.harness import STANDIN


@dataclass(frozen=True)
class FakeStack:
    name: str
    engine: str
    version: str
    speed: float = 1.0
    torch: str | None = None  # the torch version this stack's interpreter sees


def make_interpreter(root: Path, stack: FakeStack) -> Path:
    """The stack's interpreter: a shell script that sets the release and speed, then runs this
    Python with the stand-ins (and the stack's torch, if any) first on its path."""
    folder = root / "stacks" / stack.name
    folder.mkdir(parents=True, exist_ok=True)
    path = [str(STANDIN)]
    if stack.torch is not None:
        site = folder / "site"
        (site / "torch").mkdir(parents=True, exist_ok=True)
        (site / "torch" / "__init__.py").write_text(f"__version__ = {stack.torch!r}\n")
        (site / "torch" / "version.py").write_text(
            f"__version__ = {stack.torch!r}\ncuda = None\nhip = None\n")
        path.insert(0, str(site))
    python = folder / "python"
    python.write_text(
        "#!/bin/sh\n"
        f"STANDIN_VERSION={shlex.quote(stack.version)} "
        f"STANDIN_SPEED={stack.speed} "
        f"PYTHONPATH={shlex.quote(':'.join(path))}${{PYTHONPATH:+:$PYTHONPATH}} "
        f'exec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    return python


def write_stacks_file(root: Path, stacks: Sequence[FakeStack]) -> Path:
    """The host's stacks file naming `stacks` in this order, each with its interpreter."""
    lines = [f"{s.name}: {{engine: {s.engine}, python: {make_interpreter(root, s)}}}"
             for s in stacks]
    path = root / "stacks.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
