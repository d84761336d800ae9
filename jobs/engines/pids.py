"""Processes as /proc shows them: whether one still runs, when it started, who is in a group.

A pid alone does not name a process (pids are reused); a pid with its start time does, on one
host and in one pid namespace. The process registry (`jobs.engines.orphans`) and the owners of
batches (`jobs.ops.owners`) rely on that.
"""

from __future__ import annotations

import os
import socket


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (field 3 is [0]); None: no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22); None
    when it is gone or a zombie: with the pid, it names one process across pid reuse."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(pid: int, *, started: int | None = None) -> bool:
    """Whether `pid` runs (a zombie is dead); with `started` (see `start_time`), whether it is
    still that same process."""
    fields = _stat_fields(pid)
    if fields is None:
        try:
            os.kill(pid, 0)  # no /proc to read: ask the kernel
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or (len(fields) > 19 and int(fields[19]) == started)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, read from /proc."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in group `pgid`; `bool(group_members(pgid))`,
    without reading all of /proc where the kernel or the leader already tells: a stop polls
    this 20 times a second, and a busy host runs hundreds of processes."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # no process at all, zombies included
    except PermissionError:
        pass
    leader = _stat_fields(pgid)
    if leader is not None and len(leader) > 2 and leader[0] not in ("Z", "X") \
            and int(leader[2]) == pgid:
        return True
    return bool(group_members(pgid))


def pid_namespace() -> str:
    """This process's pid namespace (its inode): pids of two namespaces are not comparable."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "-"


def host() -> str:
    return socket.gethostname()
