"""`group_alive`: whether a process group still has a live member, as reading all of /proc
(`group_members`) says, through its shortcuts: the kernel's answer for a group with no process
at all, and the leader's own entry while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from jobs.engines.pids import group_alive, group_members

# A session leader that starts a child in its group, prints the child's pid and waits.
LEADER = ("import subprocess, sys, time; "
          "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
          "print(child.pid, flush=True); time.sleep(60)")


def _until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.02)
    raise AssertionError("not within the timeout")


def test_a_group_is_alive_while_any_member_runs_and_not_once_only_zombies_are_left() -> None:
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        pgid = leader.pid
        assert group_alive(pgid) and sorted(group_members(pgid)) == sorted([pgid, child])
        os.kill(pgid, signal.SIGKILL)  # the leader is gone (a zombie until reaped)...
        _until(lambda: group_members(pgid) == [child])
        assert group_alive(pgid)  # ...its child, still in the group, keeps it alive
        os.kill(child, signal.SIGKILL)
        _until(lambda: not group_members(pgid))
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
