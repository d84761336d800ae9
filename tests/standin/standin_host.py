"""A GPU host whose speed drifts while a batch runs, as a shared host's does (a neighbour's job,
a GPU warming up): both stand-ins import it as `standin_host` (tests/standin is on their path).

STANDIN_HOST_FILE names a file that every server start appends a line to; with
STANDIN_HOST_DRIFT_PCT set, each server started before this one has made the host that much
slower (3: the first server runs at 100 %, the second at 97 %, the third at 94.09 %...). A
benchmark run reads the count its server left, so a batch's baseline measured first and again
last sees the drift. Unset, the host keeps its speed.

A host keeps several engine environments side by side (docs/contracts.md "Stacks"): an
interpreter of one of them sets STANDIN_SPEED, how fast that installation runs (a factor on
every configuration's throughput, default 1.0), and a configuration may run at a speed of its
own on one release: STANDIN_THROUGHPUT is a number, or `RELEASE=NUMBER,...` with an optional
plain default (`82,0.5.23=60`: 82 tokens/s, 60 on release 0.5.23).
STANDIN_ENV_FILE names a JSON file whose `env` is laid over the environment of every stand-in
process as it starts: what a long-lived worker's host looks like night after night (another
release in STANDIN_VERSION, another speed in STANDIN_THROUGHPUT, another GPU in
STANDIN_GPU_NAME for the fake nvidia-smi). Its `later` ({"after": N, "env": {...}}) is laid over
that once more than N servers have started since the file was written (each start appends a line
to FILE.starts, which the test empties with the file): a night whose batch ran slow and whose
confirmation, the next servers, did not.
"""

from __future__ import annotations

import json
import os


def note_start() -> None:
    """One more server started on this host."""
    path = os.environ.get("STANDIN_HOST_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    night = os.environ.get("STANDIN_ENV_FILE")
    if night:
        with open(night + ".starts", "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")


def apply_env_file() -> None:
    """STANDIN_ENV_FILE's environment laid over this process's (see the module)."""
    path = os.environ.get("STANDIN_ENV_FILE")
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return
    env = dict(data.get("env") or {})
    later = data.get("later") or {}
    if later and _starts(path) > int(later.get("after", 0)):
        env.update(later.get("env") or {})
    os.environ.update({str(k): str(v) for k, v in env.items()})


def _starts(path: str) -> int:
    try:
        with open(path + ".starts", encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def host_speed() -> float:
    """The host's speed now, as a share of its first server's."""
    path = os.environ.get("STANDIN_HOST_FILE")
    drift = float(os.environ.get("STANDIN_HOST_DRIFT_PCT") or 0.0)
    if not path or not drift:
        return 1.0
    try:
        with open(path, encoding="utf-8") as handle:
            starts = sum(1 for line in handle if line.strip())
    except OSError:
        return 1.0
    return float((1.0 - drift / 100.0) ** max(0, starts - 1))


def throughput(version: str, default: float = 82.0) -> float:
    """Output tokens/s of one request on this installation: STANDIN_THROUGHPUT for `version`
    (the stand-in's release), times the interpreter's STANDIN_SPEED."""
    base = default
    for part in (os.environ.get("STANDIN_THROUGHPUT") or "").split(","):
        release, eq, value = part.strip().rpartition("=")
        if not value:
            continue
        if not eq:
            base = float(value) if release == "" else base
        elif release == version:
            base = float(value)
            break
    return base * float(os.environ.get("STANDIN_SPEED") or 1.0)
