"""SGLang's log line format, and the info file tests read to find the stand-in's processes."""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any


def log(message: str, *, rank: int | None = 0) -> None:
    """One line as SGLang logs it: `[time TPn] message` from a rank, `[time] message` else."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    prefix = f"[{stamp} TP{rank}]" if rank is not None else f"[{stamp}]"
    sys.stdout.write(f"{prefix} {message}\n")
    sys.stdout.flush()


def note(role: str, **extra: Any) -> None:
    """Append {"role", "pid", "pgid", "time", ...} to $STANDIN_INFO_FILE, when it is set."""
    path = os.environ.get("STANDIN_INFO_FILE")
    if not path:
        return
    from sglang import __version__  # the release it plays (a stack's, in a host of several)

    entry = {"role": role, "pid": os.getpid(), "pgid": os.getpgid(0), "time": time.time(),
             "version": __version__}
    entry.update(extra)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
