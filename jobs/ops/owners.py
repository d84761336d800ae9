"""Which process holds something (a summary's claim): `host:pid:start:pidns:nonce`, and whether
that process is known to be dead.

The start time (jobs.engines.procs.start_time) pins the pid to one process across pid reuse, the
pid namespace keeps a container's pids apart from the host's, and the nonce tells two holders of
one process apart. Only a holder on this host (and pid namespace) can be known dead; any other is
left to its claim's expiry. The same format as jobs.broker.worker's lease owners.
"""

from __future__ import annotations

import os
import socket
import uuid

from jobs.engines import procs


def pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "-"


def process_owner() -> str:
    """A fresh holder name for this process."""
    pid = os.getpid()
    return (f"{socket.gethostname()}:{pid}:{procs.start_time(pid)}:{pid_namespace()}:"
            f"{uuid.uuid4().hex[:8]}")


def is_dead_here(owner: str | None) -> bool:
    """Whether `owner` names a process of this host and pid namespace that no longer runs."""
    parts = (owner or "").split(":")
    if len(parts) != 5 or parts[0] != socket.gethostname() or parts[3] != pid_namespace():
        return False
    try:
        pid, started = int(parts[1]), int(parts[2])
    except ValueError:
        return False
    return not procs.is_alive(pid, started=started)
