"""vLLM's log line format, and the info file tests read to find the stand-in's processes.

vllm/logger.py (0.33.0) `_FORMAT`: "(%(vllm_process_name)s pid=%(process)d) %(levelname)s
%(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s", date "%m-%d %H:%M:%S"; NewLineFormatter
repeats the prefix on each line of a multi-line message. The API server logs as `APIServer`, the
engine as `EngineCore` (TP=1) and its workers as `Worker_TP<rank>` (TP>1).
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

PROCESS = {"name": "APIServer"}


def log(level: str, where: str, line: int, message: str, *, process: str | None = None,
        pid: int | None = None) -> None:
    """One record as vLLM formats it, on stdout (VLLM_LOGGING_STREAM's default)."""
    stamp = time.strftime("%m-%d %H:%M:%S")
    prefix = (f"({process or PROCESS['name']} pid={pid or os.getpid()}) {level} {stamp} "
              f"[{where}:{line}] ")
    sys.stdout.write("".join(prefix + part + "\n" for part in message.split("\n")))
    sys.stdout.flush()


def info(where: str, line: int, message: str, **kwargs: Any) -> None:
    log("INFO", where, line, message, **kwargs)


def note(role: str, **extra: Any) -> None:
    """Append {"role", "pid", "pgid", "time", ...} to $STANDIN_INFO_FILE, when it is set."""
    path = os.environ.get("STANDIN_INFO_FILE")
    if not path:
        return
    from vllm import __version__  # the release it plays (a stack's, in a host of several)

    entry = {"role": role, "pid": os.getpid(), "pgid": os.getpgid(0), "time": time.time(),
             "version": __version__}
    entry.update(extra)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
