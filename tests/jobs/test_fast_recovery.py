"""Fast recovery after a kill -9 (issue 10, item 6): a worker restarted on the same host knows its
predecessor is dead (host, pid and process start time in the lease owner) and takes the lease at
once, and the start-up sweep kills the servers the dead worker left, even while it is a zombie.

The real-process test runs `specbench worker` on a Redis database of its own with a lease TTL
of an hour, so that a resume at all, within the test's minute, can only come from knowing the
owner is dead (how soon it comes, issue 10's 5 s, is make bench's bench_recovery).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.planning import plan_batch
from jobs.broker.worker import is_dead_here, lease_owner
from jobs.engines import procs
from jobs.store import Store
from tests.builders import killed_worker
from tests.jobs.test_distributed import (
    TAG,
    Site,
    is_end,
    is_phase,
    leftovers,
    make_site,
    pipeline_preset,
    redis_db,
    wait_until,
)

LEASE_TTL_S = 3600.0  # a lease that lapses long after the test would have failed


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_until(lambda: _state(child.pid) == "Z", timeout=60, what="a zombie")
    return child


def test_a_zombie_is_dead() -> None:
    child = _zombie()
    try:
        os.kill(child.pid, 0)  # the kernel still answers for it: why kill(0) is not enough
        assert not procs.is_alive(child.pid)
        assert procs.start_time(child.pid) is None
    finally:
        child.wait()
    assert not procs.is_alive(child.pid)


def test_a_live_process_is_alive_only_with_its_own_start_time() -> None:
    started = procs.start_time(os.getpid())
    assert started is not None
    assert procs.is_alive(os.getpid()) and procs.is_alive(os.getpid(), started=started)
    assert not procs.is_alive(os.getpid(), started=started + 1)  # the pid, reused


def test_kill_orphans_kills_a_group_whose_owner_is_a_zombie(tmp_path: Path) -> None:
    owner = _zombie()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True)
    try:
        (tmp_path / f"pg-{server.pid}.json").write_text(json.dumps(
            {"pgid": server.pid, "owner": owner.pid, "owner_started": None}))
        assert procs.kill_orphans(tmp_path) == [server.pid]
        assert server.wait(timeout=5) == -signal.SIGKILL
        assert list(tmp_path.iterdir()) == []
    finally:
        owner.wait()
        if server.poll() is None:
            server.kill()
            server.wait()


def test_kill_orphans_leaves_a_live_owners_group(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True)
    try:
        (tmp_path / f"pg-{server.pid}.json").write_text(json.dumps(
            {"pgid": server.pid, "owner": owner.pid,
             "owner_started": procs.start_time(owner.pid)}))
        assert procs.kill_orphans(tmp_path) == []
        assert server.poll() is None
    finally:
        for proc in (owner, server):
            proc.kill()
            proc.wait()


def test_a_lease_owner_names_this_process_and_is_dead_once_it_is_gone() -> None:
    mine = lease_owner()
    host, pid, started, _ns, _nonce = mine.split(":")
    assert (host, int(pid), int(started)) == (
        socket.gethostname(), os.getpid(), procs.start_time(os.getpid()))
    assert not is_dead_here(mine)
    child = _zombie()
    try:
        dead = ":".join([host, str(child.pid), started, _ns, "0000"])
        assert is_dead_here(dead)
    finally:
        child.wait()
    reused = ":".join([host, pid, str(int(started) + 1), _ns, "0000"])
    assert is_dead_here(reused), "the same pid with another start time is another process"
    # Another host, another pid namespace, an old-format owner: left to the lease's expiry.
    assert not is_dead_here(":".join(["elsewhere", str(child.pid), started, _ns, "0"]))
    assert not is_dead_here(":".join([host, str(child.pid), started, "1", "0"]))
    assert not is_dead_here(f"{host}:{child.pid}:abc123:0000")
    assert not is_dead_here(None)


def test_a_lease_is_taken_over_only_from_the_owner_named(tmp_path: Path) -> None:
    from tests.conftest import make_plan

    with Store(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        store.create_batch(batch_id="b-1", preset="eagle3", engine="local", queue="default",
                           requested_by="U1", plan=make_plan())
        assert store.try_acquire_lease("b-1", "dead", 30)
        assert not store.try_acquire_lease("b-1", "new", 30)
        assert not store.take_over_lease("b-1", "new", 30, dead="someone-else")
        assert store.take_over_lease("b-1", "new", 30, dead="dead")
        row = store.get_batch("b-1")
        assert row is not None and row.lease_owner == "new"
        assert not store.take_over_lease("b-1", "third", 30, dead="dead")


@pytest.fixture(scope="module")
def recovery_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    preset = pipeline_preset("standin-reps", reps=3, tag=TAG, second_startup="0.2")
    yield make_site(tmp_path_factory.mktemp("recovery"), next(gen), {"standin-reps": preset},
                    ttl=LEASE_TTL_S)
    next(gen, None)


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_worker_restarted_after_kill_9_resumes_before_the_lease_lapses(
    recovery_site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = recovery_site
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    with killed_worker(site, "fast") as run:
        batch = run.submit(plan_batch("standin-reps", queue="fast"))
        run.wait(is_phase(batch, 2, "repetition"), timeout=30)
        # A crash: the worker alone is SIGKILLed; its servers, in sessions of their own,
        # survive it. It is dead once a zombie (its parent, this test, reaps it later) or
        # gone (the warm interpreter that forked it reaps it at once: tests/warm_cli.py).
        worker = run.worker
        worker.proc.send_signal(signal.SIGKILL)
        wait_until(lambda: _state(worker.proc.pid) in ("Z", None), timeout=60,
                   what="the dead worker")
        assert leftovers(), "the dead worker's server should outlive it"
        restarted = run.restart()
        run.wait(is_phase(batch, 2, "launching"), timeout=60)  # the lease lapses in an hour
        events = run.wait(is_end(batch), timeout=60)
    assert f"took the lease of {batch} from " in restarted.output()
    assert "killed 1 server group" in restarted.output() or "killed 2 server group" in (
        restarted.output())
    assert events[-1]["type"] == "batch.finished"
    store = Store(site.database)
    assert [(r.approach, r.status) for r in store.records(batch)] == [
        ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
    assert store.get_batch(batch).state == "done"  # type: ignore[union-attr]
    assert leftovers() == []


class _App:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, *, args: list[str], queue: str) -> None:
        self.sent.append(args[0])


def test_the_start_up_sweep_resends_a_batch_whose_owner_died_here(tmp_path: Path) -> None:
    from jobs.broker.worker import Runtime, sweep
    from tests.conftest import make_plan

    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    for batch in ("b-dead", "b-live", "b-elsewhere"):
        store.create_batch(batch_id=batch, preset="eagle3", engine="local", queue="q",
                           requested_by="U1", plan=make_plan())
        store.set_state(batch, "running")
    child = _zombie()
    try:
        host, _pid, started, ns, _nonce = lease_owner().split(":")
        dead = ":".join([host, str(child.pid), started, ns, "0000"])
        assert store.try_acquire_lease("b-dead", dead, 30)
        assert store.try_acquire_lease("b-live", lease_owner(), 30)
        assert store.try_acquire_lease("b-elsewhere", f"other-host:{child.pid}:1:{ns}:0", 30)
        app = _App()
        rt = Runtime(queue="q", url="redis://unused", store=store, client=None,  # type: ignore[arg-type]
                     ttl=30.0)
        assert sweep(rt, app, startup=True) == ["b-dead"]
        assert app.sent == ["b-dead"]
    finally:
        child.wait()
        store.close()


def test_the_patient_store_gives_up_in_the_end_and_a_cancel_check_says_no(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import OperationalError

    from jobs.broker import worker

    monkeypatch.setenv("SPECBENCH_DB_PATIENCE_S", "0.6")
    (tmp_path / "a-folder.db").mkdir()  # SQLite cannot open a folder: the database is "away"
    store = worker.PatientStore(f"sqlite:///{tmp_path / 'a-folder.db'}")
    begun = time.monotonic()
    with pytest.raises(OperationalError):  # it gives up in the end, after waiting its patience
        store.get_batch("b-1")
    assert time.monotonic() - begun >= 0.3
    assert store.is_cancel_requested("b-1") is False
