"""The local engine's fork server with light children (`python -c`), no torch: each child its own
session, gone after a stop or a crash; the server gone with its engine and with its parent; a
fresh process whenever the server cannot give one."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobs.engines.local import forked
from jobs.engines.local.engine import LocalEngine
from jobs.engines.local.forked import ForkedGroup, ForkUnavailable
from jobs.engines.local.launcher import Launcher
from jobs.engines.pids import is_alive
from jobs.engines.procs import ProcessGroup, group_members, kill_orphans

REPO = Path(__file__).resolve().parents[3]
SHOW = ("import json, os; print(json.dumps({'env': dict(os.environ), 'pid': os.getpid(), "
        "'pgid': os.getpgid(0), 'sid': os.getsid(0), 'ppid': os.getppid()}))")
# A child that leaves a grandchild in its group, says so, then waits or crashes.
FAMILY = ("import os, signal, subprocess, sys, time; "
          "p = subprocess.Popen(['sleep', '60']); print('grandchild', p.pid, flush=True); "
          "os.kill(os.getpid(), signal.SIGSEGV) if sys.argv[1:] == ['crash'] else time.sleep(60)")


@pytest.fixture
def launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Launcher]:
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "data"))
    made = Launcher(modules=())
    yield made
    made.close()


def start(launcher: Launcher, tmp_path: Path, code: str, *args: str,
          env: dict[str, str] | None = None) -> ProcessGroup:
    return start_argv(launcher, tmp_path, [sys.executable, "-c", code, *args], env=env)


def start_argv(launcher: Launcher, tmp_path: Path, argv: list[str],
               env: dict[str, str] | None = None) -> ProcessGroup:
    return launcher.start(argv, env=env or dict(os.environ), log_path=tmp_path / "child.log",
                          on_line=lambda line: None, secrets=(), should_stop=lambda: False,
                          wait_s=30)


def finished(group: ProcessGroup) -> list[str]:
    group.proc.wait(timeout=10)
    group.wait_output()
    group.stop(grace_s=1.0)
    return list(group.tail)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_forked_child_leads_its_session_with_exactly_its_environment(
    launcher: Launcher, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    env["SPECBENCH_TEST_MARK"] = "forked"
    group = start(launcher, tmp_path, SHOW, env=env)
    assert isinstance(group, ForkedGroup) and launcher.forked == 1
    shown = json.loads(finished(group)[-1])
    assert shown["env"] == env  # nothing of the server's or of the engine's added or missing
    assert shown["pid"] == shown["pgid"] == shown["sid"] == group.pgid
    assert group.proc.returncode == 0 and group.pgid not in group_members(os.getpgid(0))
    second = start(launcher, tmp_path, SHOW, env=env)
    assert isinstance(second, ForkedGroup) and launcher.forked == 2
    assert json.loads(finished(second)[-1])["ppid"] == shown["ppid"]  # the same warm server


def test_another_environment_gets_a_server_of_its_own(launcher: Launcher, tmp_path: Path) -> None:
    first = json.loads(finished(start(launcher, tmp_path, SHOW))[-1])
    other = {**os.environ, "OMP_NUM_THREADS": "1"}
    second = json.loads(finished(start(launcher, tmp_path, SHOW, env=other))[-1])
    assert second["env"] == other and second["ppid"] != first["ppid"]
    assert not is_alive(first["ppid"])  # the first server was stopped, not leaked
    assert launcher.forked == 2 and launcher.fresh == 0


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_a_stopped_or_crashed_forked_group_leaves_nothing(
    launcher: Launcher, tmp_path: Path, how: str
) -> None:
    group = start(launcher, tmp_path, FAMILY, *(["crash"] if how == "crash" else []))
    wait_for(lambda: any(line.startswith("grandchild") for line in group.tail), "the grandchild")
    grandchild = int(next(line for line in group.tail if line.startswith("grandchild")).split()[1])
    if how == "crash":
        assert group.proc.wait(timeout=10) == -signal.SIGSEGV
        assert is_alive(grandchild)  # the crash left it; the engine's stop takes the group
    group.stop(grace_s=1.0)
    assert group.proc.returncode == (-signal.SIGSEGV if how == "crash" else -signal.SIGTERM)
    assert group_members(group.pgid) == [] and not is_alive(grandchild)


def test_the_fork_server_ends_with_its_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "data"))
    for ending in ("close", "collected"):
        engine = LocalEngine(fork=True)
        engine.launcher._modules = ()  # a light server: this test is about its lifetime
        finished(start(engine.launcher, tmp_path, SHOW))
        server = engine.launcher._server
        assert server is not None and server.is_alive()
        registered = list((tmp_path / "data" / "run" / "embedded").glob("pg-*.json"))
        assert [p.name for p in registered] == [f"pg-{server.group.pgid}.json"]
        if ending == "close":
            engine.close()
        else:
            del engine
            gc.collect()
        assert group_members(server.group.pgid) == [], ending
        assert not Path(server.path).parent.exists(), ending
        assert not list((tmp_path / "data" / "run" / "embedded").glob("pg-*.json")), ending


PARENT = """
import os, sys, time
from pathlib import Path
from jobs.engines.local.launcher import Launcher
launcher = Launcher(modules=())
group = launcher.start([sys.executable, "-c", "import time; time.sleep(60)"],
                       env=dict(os.environ), log_path=Path(sys.argv[1]), on_line=lambda l: None,
                       secrets=(), should_stop=lambda: False, wait_s=30)
print(launcher._server.group.pgid, group.pgid, launcher._server.path, flush=True)
time.sleep(60)
"""


def test_the_fork_server_and_its_children_die_with_their_parent(tmp_path: Path) -> None:
    env = {**os.environ, "SPECBENCH_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "child.log")],
                              env=env, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert parent.stdout is not None
        server, child, socket_path = parent.stdout.readline().split()
        server_pgid, child_pgid, folder = int(server), int(child), Path(socket_path).parent
        assert group_members(server_pgid) and group_members(child_pgid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_for(lambda: not group_members(server_pgid) and not group_members(child_pgid),
                 "the server and its child to die with their parent", timeout=60)
        wait_for(lambda: not folder.exists(), "the server to remove its folder", timeout=60)
        registry = tmp_path / "data" / "run" / "embedded"
        assert len(list(registry.glob("pg-*.json"))) == 2  # both groups were registered
        assert kill_orphans(registry) == [] and not list(registry.glob("pg-*.json"))
    finally:
        parent.kill()
        parent.wait()


def test_a_fresh_process_when_the_fork_server_cannot_start(tmp_path: Path) -> None:
    launcher = Launcher(modules=("specbench_no_such_module",))
    try:
        group = start(launcher, tmp_path, SHOW)
        assert type(group) is ProcessGroup and launcher.fresh == 1 and launcher.forked == 0
        assert json.loads(finished(group)[-1])["pid"] == group.pgid
        again = start(launcher, tmp_path, SHOW)  # no second try: it would fail again
        assert type(again) is ProcessGroup and launcher._server is None
        finished(again)
    finally:
        launcher.close()


def test_a_fresh_process_when_the_fork_server_dies_or_fails(
    launcher: Launcher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished(start(launcher, tmp_path, SHOW))
    server = launcher._server
    assert server is not None
    os.killpg(server.group.pgid, signal.SIGKILL)
    wait_for(lambda: not server.is_alive(), "the server to die")
    replaced = start(launcher, tmp_path, SHOW)  # a dead server is replaced, not waited on
    assert isinstance(replaced, ForkedGroup) and launcher._server is not server
    finished(replaced)

    def refuse(*args: object, **kwargs: object) -> None:
        raise ForkUnavailable("refused for the test")

    monkeypatch.setattr(forked.ForkServer, "spawn", refuse)
    fresh = start(launcher, tmp_path, SHOW)
    assert type(fresh) is ProcessGroup and launcher.fresh == 1
    assert json.loads(finished(fresh)[-1])["pid"] == fresh.pgid


@pytest.mark.parametrize("argv", [
    ["-c", "import sys; print(sys.argv[1:]); raise RuntimeError('boom') from KeyError('k')", "x"],
    ["-m", "json.tool", "--no-such-flag"],
    ["-m", "specbench_no_such_module"],
    ["-c", "import sys; sys.exit('a message, exit 1')"],
    ["-c", "import signal, sys; print([signal.getsignal(s) for s in (signal.SIGCHLD, "
     "signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)], signal.set_wakeup_fd(-1)); sys.exit(3)"],
])
def test_a_forked_child_writes_and_exits_as_a_fresh_one(
    launcher: Launcher, tmp_path: Path, argv: list[str]
) -> None:
    """Same lines (tracebacks from the same frame, argparse's usage, runpy's errors), same code."""
    fresh_launcher = Launcher(fork=False)
    fresh = start_argv(fresh_launcher, tmp_path, [sys.executable, *argv])
    forked_group = start_argv(launcher, tmp_path, [sys.executable, *argv])
    assert isinstance(forked_group, ForkedGroup) and type(fresh) is ProcessGroup
    assert finished(forked_group) == finished(fresh)
    assert forked_group.proc.returncode == fresh.proc.returncode != 0
