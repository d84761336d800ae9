"""Every batch ends (docs/contracts.md "Every batch ends", issue 19 item 1, issue 20 item
5): a real `specbench run` stopped by SIGTERM, SIGHUP or kill -9 mid-batch, the console's Ctrl-C,
and `cancel` of a batch whose runner is dead, on the stand-in SGLang. Afterwards no process of the
batch is left (by tag and by process group) and no batch is queued or running. The batches run
in real `specbench` processes, stopped by real signals; the commands that end a dead runner's
batch (`status`, `cancel`) and read it afterwards (`show`, `digest`) run in the test's own
process (tests/builders.py `specbench_here`): they end it through the store and its servers'
registry, which needs no process of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.engines.procs import group_members
from jobs.store import Store
from tests.builders import specbench_here
from tests.conftest import REPO
from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

PRESET = {
    "name": "standin-life", "description": "A batch to stop half way",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 1,
    "warmup": False, "timeouts": {"startup_s": 20, "bench_s": 120}, "bench": TINY_BENCH,
    "overridable": [],
    "baseline": {"server_args": SERVER_ARGS, "env": {"STANDIN_THROUGHPUT": "80"}},
    "approaches": [
        {"name": "faster", "hypothesis": "More throughput", "env": {"STANDIN_THROUGHPUT": "90"}},
        # a server with child processes in its group, whose benchmark never ends
        {"name": "hangs", "hypothesis": "A benchmark that never ends",
         "env": {"STANDIN_MODE": "slow-bench"}},
        {"name": "after", "hypothesis": "Never reached", "env": {}},
    ],
}
ACTIVE = ("queued", "running")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config"
    (config / "presets").mkdir(parents=True)
    for name in ("failure_rules.yaml", "remedies.yaml"):
        (config / name).write_text((REPO / "config" / name).read_text())
    (config / "presets" / "standin-life.yaml").write_text(yaml.safe_dump(PRESET))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    clean.update(
        PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
        SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
        SPECBENCH_DATA_DIR=str(tmp_path / "data"),
        STANDIN_TAG=f"{tmp_path.name}-{uuid.uuid4().hex[:8]}",  # unique across xdist workers
        # servers ready at once: the tests stop a batch, they do not time its start
        STANDIN_STARTUP_S="0.05", STANDIN_HEALTH_S="0.02", USER="tester",
    )
    return clean


@pytest.fixture(autouse=True)
def _no_leftovers(env: dict[str, str]) -> Iterator[None]:
    """Whatever a failing test leaves running is killed, so it does not load the next ones."""
    yield
    for pid in tagged(env["STANDIN_TAG"]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def store_of(env: dict[str, str]) -> Store:
    return Store(f"sqlite:///{Path(env['SPECBENCH_DATA_DIR']).resolve()}/specbench.db")


def tagged(tag: str) -> list[int]:
    """Live processes started for this test (the stand-in's servers, children, benchmarks)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"STANDIN_TAG={tag}".encode() in environ and state != "Z":
            found.append(int(entry))
    return found


def specbench(capsys: pytest.CaptureFixture[str], env: dict[str, str],
              *args: str) -> subprocess.CompletedProcess[str]:
    """`specbench ARGS` in this process, with exactly the environment `env` (its STANDIN_ and
    SPECBENCH_ variables those alone)."""
    return specbench_here(capsys, *args, env=env, drop=("STANDIN_", "SPECBENCH_"), cwd=REPO)


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bot.cli.main", *args], cwd=REPO, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def hanging_benchmark_said(env: dict[str, str]) -> bool:
    """Whether the hanging benchmark has written its last line (`Starting warmup`): a process
    still starting when its reader is killed dies of the broken pipe at its first line. Its own
    logs alone: the configurations before it wrote the same line."""
    logs = Path(env["SPECBENCH_DATA_DIR"]) / "logs"
    return any("Starting warmup" in log.read_text(errors="replace")
               for log in logs.rglob("hangs*.log"))


def wait_for_the_hanging_server(env: dict[str, str], proc: subprocess.Popen[str],
                                timeout: float = 90) -> list[int]:
    """Until the third configuration's server runs (two records stored, its benchmark
    hanging, its last line written); the process groups of the batch then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            with store_of(env) as store:
                rows = store.list_batches(states=ACTIVE)
                done = len(store.records(rows[0].id)) if rows else 0
        except Exception:  # noqa: BLE001 - the database may not exist yet
            done = 0
        said = hanging_benchmark_said(env)  # before the groups: its own is among them then
        groups = groups_of(env["STANDIN_TAG"])
        if done >= 2 and said and len(groups) >= 2:
            return groups  # the server and its hanging benchmark
        time.sleep(0.1)
    raise AssertionError("the hanging configuration never started")


def groups_of(tag: str) -> list[int]:
    """The process groups of the tagged processes but the test's own (where the CLI is): the
    servers' and benchmarks', each in a session of its own."""
    groups = set()
    for pid in tagged(tag):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    return sorted(groups - {os.getpgrp()})


def assert_nothing_left(env: dict[str, str], groups: list[int]) -> None:
    assert tagged(env["STANDIN_TAG"]) == []
    assert {g: group_members(g) for g in groups} == {g: [] for g in groups}
    with store_of(env) as store:
        assert store.list_batches(states=ACTIVE) == []


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopped_run_cancels_its_batch_and_stops_its_servers_before_it_exits(
    env: dict[str, str], signum: signal.Signals
) -> None:
    run = start(env, "run", "standin-life", "--format", "json")
    groups = wait_for_the_hanging_server(env, run)
    run.send_signal(signum)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 1, err
    assert f"interrupted by {signum.name}: cancelling batch" in err
    assert_nothing_left(env, groups)  # at once: the CLI stopped them before it exited
    report: dict[str, Any] = json.loads(out)
    assert report["state"] == "cancelled"
    with store_of(env) as store:
        [batch] = store.list_batches()
        assert batch.state == "cancelled"
        assert [(r.approach, r.status) for r in store.records(batch.id)] == [
            ("baseline", "ok"), ("faster", "ok"), ("hangs", "cancelled"), ("after", "skipped")]


@pytest.mark.timeout(180)
def test_a_run_killed_with_9_is_ended_by_the_next_command_that_reads_its_batch(
    env: dict[str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    run = start(env, "run", "standin-life")
    groups = wait_for_the_hanging_server(env, run)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    assert groups_of(env["STANDIN_TAG"]) == groups, "the servers outlive a kill -9 of the CLI"
    with store_of(env) as store:
        [batch] = store.list_batches(states=ACTIVE)

    status = specbench(capsys, env, "status")
    assert status.returncode == 0, status.stderr
    why = f"runner pid {run.pid} on host {os.uname().nodename} died"
    assert f"batch {batch.id} ended failed: {why}" in status.stdout
    assert "No batch is running or queued." in status.stdout
    assert_nothing_left(env, groups)
    with store_of(env) as store:
        ended = store.get_batch(batch.id)
        assert ended is not None and ended.state == "failed" and why in (ended.error or "")

    # it ended with a report: show never fails on it
    shown = specbench(capsys, env, "show")
    assert shown.returncode == 0, shown.stderr
    assert f"Ended failed: {why}" in shown.stdout
    digested = specbench(capsys, env, "digest", "--format", "json")
    digest = json.loads(digested.stdout)
    assert [b["state"] for b in digest["batches"]] == ["failed"]
    assert "running" not in digest["counts"]


@pytest.mark.timeout(180)
def test_cancel_of_a_batch_whose_runner_is_dead_ends_it_and_kills_its_servers(
    env: dict[str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    run = start(env, "run", "standin-life")
    groups = wait_for_the_hanging_server(env, run)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    with store_of(env) as store:
        [batch] = store.list_batches(states=ACTIVE)
    done = specbench(capsys, env, "cancel", batch.id)
    assert done.returncode == 0, done.stderr
    assert f"batch {batch.id}: cancel requested by tester; ended cancelled:" in done.stdout
    assert f"runner pid {run.pid} on host" in done.stdout and "killed" in done.stdout
    assert_nothing_left(env, groups)
    with store_of(env) as store:
        assert store.get_batch(batch.id).state == "cancelled"  # type: ignore[union-attr]


@pytest.mark.timeout(180)
def test_the_consoles_ctrl_c_stops_the_batch_not_only_the_display(env: dict[str, str]) -> None:
    console = start(env, "console", "-c", "run standin-life")
    groups = wait_for_the_hanging_server(env, console)
    console.send_signal(signal.SIGINT)
    out, err = console.communicate(timeout=60)
    assert console.returncode == 1, err
    assert_nothing_left(env, groups)
    with store_of(env) as store:
        [batch] = store.list_batches()
        assert batch.state == "cancelled"
        assert "specbench console stopped by SIGINT" in (batch.error or "")
