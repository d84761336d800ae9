"""Which process holds something (a summary's claim): `host:pid:start:pidns:nonce`, and whether
that process is known to be dead.

The start time (jobs.engines.procs.start_time) pins the pid to one process across pid reuse, the
pid namespace keeps a container's pids apart from the host's, and the nonce tells two holders of
one process apart. Only a holder on this host (and pid namespace) can be known dead; any other is
left to its claim's expiry. The one source of this format: jobs.broker.worker's lease owners,
jobs.batches.runners' embedded runners and the summary claims all name their holders here.
"""

from __future__ import annotations

import os
import uuid

from jobs.engines.pids import host, is_alive, pid_namespace, start_time


def process_owner() -> str:
    """A fresh holder name for this process."""
    pid = os.getpid()
    return f"{host()}:{pid}:{start_time(pid)}:{pid_namespace()}:{uuid.uuid4().hex[:8]}"


def dead_pid(owner: str | None) -> int | None:
    """The pid `owner` names when it is a process of this host and pid namespace that no longer
    runs (its start time tells it from a reused pid); None for a live one, one elsewhere, one in
    another format, or no owner."""
    parts = (owner or "").split(":")
    if len(parts) != 5 or parts[0] != host() or parts[3] != pid_namespace():
        return None
    try:
        pid, started = int(parts[1]), int(parts[2])
    except ValueError:
        return None
    return None if is_alive(pid, started=started) else pid


def is_dead_here(owner: str | None) -> bool:
    """Whether `owner` names a process of this host and pid namespace that no longer runs."""
    return dead_pid(owner) is not None
