"""The process-group registry: what a dead process left running, and killing it.

Every process group `jobs.engines.procs` starts leaves a `pg-<pgid>.json` in a registry folder
until it is stopped: its owner (the pid and start time of the process that started it, with
host and pid namespace), its command line and its log. A worker names its folder
(`set_registry`: `<data dir>/run/<queue>`); any other process (the embedded runner of
`specbench run`, `console`, an embedded bot) uses `<data dir>/run/embedded`. When the owner
dies without stopping its groups (kill -9, a lost runner), `kill_orphans` finds and SIGKILLs
them: a worker at start-up, and any command that finds a batch whose runner is gone
(`jobs.batches.runners`).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from jobs import settings
from jobs.engines.pids import group_alive, host, is_alive, pid_namespace, start_time

_registry: Path | None = None
KILL_WAIT_S = 10.0


def set_registry(folder: Path | None) -> None:
    """Record every group started from now on in `folder` (None: the default folder)."""
    global _registry
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # a full disk: `register` makes it with each entry, or says it cannot
            pass
    _registry = folder


def registry_root() -> Path:
    """The folder of every registry folder of this data dir (one per queue, and `embedded`)."""
    return settings.data_dir().resolve() / "run"


def current_registry() -> Path:
    """Where a group started now is recorded: the folder set, else `<data dir>/run/embedded`."""
    return _registry if _registry is not None else registry_root() / "embedded"


def register(*, pgid: int, argv: Sequence[str], log_path: Path) -> Path | None:
    """Record a group this process just started; its entry's path (None: it could not be
    written, and the group is stopped by its owner alone)."""
    folder = current_registry()
    pid = os.getpid()
    info = {"pgid": pgid, "owner": pid, "owner_started": start_time(pid), "host": host(),
            "pidns": pid_namespace(), "argv": list(argv), "log": str(log_path),
            "started": time.time()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        entry = folder / f"pg-{pgid}.json"
        entry.write_text(json.dumps(info), encoding="utf-8")
    except OSError:
        return None
    return entry


def kill_orphans(folder: Path) -> list[int]:
    """SIGKILL every registered group whose owner process is dead; the groups killed.

    A group whose owner is alive belongs to a running process and is left alone; an owner that
    is a zombie (killed, not yet reaped) or whose pid now names another process is dead. An
    entry written on another host or in another pid namespace (a shared data dir) is not ours
    to judge: its pids mean other processes here."""
    killed: list[int] = []
    if not folder.is_dir():
        return killed
    for entry in sorted(folder.glob("pg-*.json")):
        try:
            info = json.loads(entry.read_text(encoding="utf-8"))
            pgid, owner = int(info["pgid"]), int(info["owner"])
            started = info.get("owner_started")
            started = int(started) if started is not None else None
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if info.get("host", host()) != host() or info.get("pidns", pid_namespace()) != (
                pid_namespace()):
            continue
        mine = owner == os.getpid() and started in (None, start_time(owner))
        if mine and group_alive(pgid):
            continue  # one of ours, still running
        if not mine and is_alive(owner, started=started):
            continue
        if group_alive(pgid):
            kill_group(pgid)
            killed.append(pgid)
        entry.unlink(missing_ok=True)
    return killed


def kill_all_orphans() -> list[int]:
    """`kill_orphans` over every registry folder of this data dir (every queue's, and the
    embedded runners'): whatever a dead process of this host left running."""
    root = registry_root()
    if not root.is_dir():
        return []
    return [pgid for folder in sorted(root.iterdir()) if folder.is_dir()
            for pgid in kill_orphans(folder)]


def kill_group(pgid: int, *, wait_s: float = KILL_WAIT_S) -> bool:
    """SIGKILL a whole process group and wait until no member is left; whether none is."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.05)
    return not group_alive(pgid)
