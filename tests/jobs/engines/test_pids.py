"""`group_alive`: whether a process group still has a live member, as reading all of /proc
(`group_members`) says, through its shortcuts: the kernel's answer for a group with no process
at all, and the leader's own entry while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from jobs.engines.pids import group_alive, group_members
from tests.jobs.test_distributed import wait_until

# A session leader that starts a child in its group, prints the child's pid and waits.
LEADER = ("import subprocess, sys, time; "
          "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
          "print(child.pid, flush=True); time.sleep(60)")


def test_a_group_is_alive_while_any_member_runs_and_not_once_only_zombies_are_left() -> None:
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        pgid = leader.pid
        assert group_alive(pgid) and sorted(group_members(pgid)) == sorted([pgid, child])
        os.kill(pgid, signal.SIGKILL)  # the leader is gone (a zombie until reaped)...
        wait_until(lambda: group_members(pgid) == [child], timeout=60,
                   what="the leader gone from its group")
        assert group_alive(pgid)  # ...its child, still in the group, keeps it alive
        os.kill(child, signal.SIGKILL)
        wait_until(lambda: not group_members(pgid), timeout=60, what="the child gone")
        assert not group_alive(pgid)  # the unreaped leader is a zombie: not alive
        leader.wait(timeout=10)
        assert not group_alive(pgid)  # and once reaped there is no process at all
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait(timeout=10)


def test_a_pid_that_leads_no_group_is_not_a_live_group() -> None:
    unused = max(int(e) for e in os.listdir("/proc") if e.isdigit()) + 100_000
    assert not group_alive(unused)
