"""The distributed pipeline against a real Redis and real `specbench worker` processes.

Every worker runs the stand-in SGLang (tests/standin): real servers in their own process groups,
real kill -9, real Redis restarts. Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.dispatch import Subscription
from jobs.batches.planning import plan_batch
from jobs.broker.dispatcher import DistributedDispatcher
from jobs.core.events import Event
from jobs.engines.procs import free_port
from jobs.store import Store
from tests.builders import killed_worker, standin_preset
from tests.standin.harness import STANDIN, Standin

REPO = Path(__file__).resolve().parents[2]
REDIS_HOST = "127.0.0.1"
REDIS_PORT = 6379
TAG = secrets.token_hex(8)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def pipeline_preset(name: str, *, reps: int, tag: str, second_startup: str = "0.2",
                    second: Mapping[str, str] | None = None) -> str:
    """A stand-in batch for the pipeline tests: the baseline, `second` (the configuration a test
    interrupts: its env `second`, by default a throughput and `second_startup`) and `third`."""
    return standin_preset(
        name, description="a stand-in batch for the pipeline tests", queue="default", reps=reps,
        env={"STANDIN_STARTUP_S": "0.2", "STANDIN_TAG": tag},
        approaches=[
            {"name": "second", "hypothesis": "the configuration a test interrupts",
             "env": dict(second or {"STANDIN_THROUGHPUT": "90",
                                    "STANDIN_STARTUP_S": second_startup})},
            {"name": "third", "hypothesis": "runs after the second",
             "env": {"STANDIN_THROUGHPUT": "70"}},
        ],
    )


def redis_db() -> Iterator[str]:
    """A Redis database of our own on the shared server, flushed before and after."""
    import redis

    try:
        redis.Redis(REDIS_HOST, REDIS_PORT, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        if os.environ.get("SPECBENCH_REQUIRE_REDIS") == "1":
            pytest.fail(f"no Redis at {REDIS_HOST}:{REDIS_PORT}: {exc}")
        pytest.skip(f"no Redis at {REDIS_HOST}:{REDIS_PORT}")
    token = secrets.token_hex(8)
    # Databases 1-14 (test_health reads 15): one is ours when its owner key is set by us on an
    # empty database; it is not flushed then, so a parallel worker (pytest -n) sees it taken.
    for db in range(1, 15):
        client = redis.Redis(REDIS_HOST, REDIS_PORT, db=db)
        if client.dbsize() == 0 and client.set("specbench:test-owner", token, nx=True, ex=900):
            try:
                yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
            finally:
                client.flushdb()
            return
    pytest.skip("no free Redis database (1-14) for this run")


@dataclass
class Site:
    """One module's setup: a database, a data dir, a config dir with the stand-in presets."""

    root: Path
    broker: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def database(self) -> str:
        return f"sqlite:///{self.root / 'specbench.db'}"

    def worker_env(self, broker: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
        env.update(self.env)
        env["SPECBENCH_BROKER_URL"] = broker or self.broker
        return env


def make_site(root: Path, broker: str, presets: dict[str, str], *, ttl: float = 3) -> Site:
    """A site in `root`: the shipped config plus `presets` (name -> YAML), a migrated SQLite
    store, and the environment every process of the test gets (the stand-in SGLang first)."""
    config = root / "config"
    shutil.copytree(REPO / "config", config)
    for name, text in presets.items():
        (config / "presets" / f"{name}.yaml").write_text(text)
    site = Site(root=root, broker=broker)
    site.env = {
        "SPECBENCH_DATABASE_URL": site.database, "SPECBENCH_DATA_DIR": str(root / "data"),
        "SPECBENCH_CONFIG_DIR": str(config), "SPECBENCH_SGLANG_PYTHON": sys.executable,
        "SPECBENCH_LEASE_TTL": f"{ttl:g}", "SPECBENCH_DIGEST_SCHEDULE": "off",
        "PYTHONPATH": os.pathsep.join((str(STANDIN), str(REPO))),
    }
    Store(site.database).migrate()
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    gen = redis_db()
    presets = {name: pipeline_preset(name, reps=reps, tag=TAG, second_startup=second)
               for name, reps, second in (("standin", 1, "0.2"), ("standin-reps", 3, "0.2"),
                                          ("standin-slow", 1, "3600"))}
    yield make_site(tmp_path_factory.mktemp("pipeline"), next(gen), presets)
    next(gen, None)


class Worker:
    """A `specbench worker` process, its output in a log file."""

    def __init__(self, site: Site, queue: str, *, broker: str | None = None) -> None:
        self.log = site.root / f"worker-{queue}-{time.monotonic_ns()}.log"
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "worker", "--queue", queue],
            env=site.worker_env(broker), cwd=REPO, stdout=self._out, stderr=subprocess.STDOUT,
        )
        wait_until(lambda: "ready." in self.output(), timeout=30, what=f"worker {queue} ready",
                   alive=self.proc)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def logged(self, text: str, *, timeout: float = 60.0) -> str:
        """The log once it holds `text` (the task logs its result after its last event)."""
        deadline = time.monotonic() + timeout
        while text not in (out := self.output()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return out

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def wait_until(check: Callable[[], Any], *, timeout: float, what: str,
               alive: subprocess.Popen[bytes] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {alive.returncode}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def collect(sub: Subscription, until: Callable[[Event], bool], *, timeout: float) -> list[Event]:
    events: list[Event] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = sub.get(timeout=0.2)
        if event is None:
            continue
        events.append(event)
        if until(event):
            return events
    raise AssertionError(f"no matching event within {timeout} s; got {[e['type'] for e in events]}")


def is_end(batch: str) -> Callable[[Event], bool]:
    return lambda e: e["batch"] == batch and e["type"] in ("batch.finished", "batch.cancelled")


def is_phase(batch: str, index: int, *phases: str) -> Callable[[Event], bool]:
    return lambda e: (e["batch"] == batch and e["type"] == "approach.phase"
                      and e["index"] == index and e["phase"] in phases)


def leftovers() -> list[str]:
    return Standin(root=Path("/nonexistent"), tag=TAG).leftovers()


def cli(site: Site, *args: str, broker: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args],
                          env=site.worker_env(broker), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def clis(site: Site, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Independent commands run at once: each spends most of its time on its own imports."""
    procs = [subprocess.Popen([sys.executable, "-m", "bot.cli.main", *args],
                              env=site.worker_env(), cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for args in commands]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


@pytest.fixture
def using(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:
    for name, value in site.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", site.broker)
    return site


@pytest.fixture(scope="module")
def main_worker(site: Site) -> Iterator[Worker]:
    worker = Worker(site, "main")
    yield worker
    worker.stop()


def dispatcher(site: Site, broker: str | None = None) -> DistributedDispatcher:
    return DistributedDispatcher(Store(site.database), broker or site.broker)


@pytest.mark.timeout(180)
def test_a_batch_runs_through_the_queue_and_a_duplicate_starts_nothing(
    using: Site, main_worker: Worker
) -> None:
    d = dispatcher(using)
    sub = d.subscribe()
    try:
        plan = plan_batch("standin", queue="main")
        first = d.submit(plan, requested_by="U1", idempotency_key="slack-evt-1")
        again = d.submit(plan, requested_by="U1", idempotency_key="slack-evt-1")
        assert first.created and not again.created and again.batch.id == first.batch.id
        assert first.live_workers == 1 and first.position == 1
        events = collect(sub, is_end(first.batch.id), timeout=40)
    finally:
        sub.close()
        d.close()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "batch.queued" and events[0]["position"] == 1
    assert kinds[1] == "batch.started" and kinds[-1] == "batch.finished"
    assert kinds.count("batch.queued") == 1 and kinds.count("batch.started") == 1
    phases = [(e["index"], e["phase"]) for e in events if e["type"] == "approach.phase"]
    assert phases[:8] == [(1, "preflight"), (1, "launching"), (1, "ready"), (1, "warmup"),
                          (1, "result"), (1, "repetition"), (1, "result"), (1, "stopping")]
    store = Store(using.database)
    assert store.get_batch(first.batch.id).state == "done"  # type: ignore[union-attr]
    assert [r.approach for r in store.records(first.batch.id)] == ["baseline", "second", "third"]
    assert len(store.list_batches()) == 1
    ran = f"run_batch {first.batch.id}: ran"
    assert main_worker.logged(ran).count(ran) == 1
    assert leftovers() == []


@pytest.mark.timeout(180)
def test_specbench_run_waits_for_the_report_in_distributed_mode(
    using: Site, main_worker: Worker
) -> None:
    done = cli(using, "run", "standin", "--queue", "main", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [r["approach"] for r in report["results"]] == ["second", "third"]
    assert report["state"] == "done" and "started on" in done.stderr


@pytest.mark.timeout(180)
def test_two_batches_on_one_queue_run_one_after_the_other(
    using: Site, main_worker: Worker
) -> None:
    d = dispatcher(using)
    sub = d.subscribe()
    try:
        one = d.submit(plan_batch("standin", queue="main"), requested_by="U1")
        two = d.submit(plan_batch("standin", queue="main"), requested_by="U2")
        assert (one.position, two.position) == (1, 2)
        collect(sub, is_end(two.batch.id), timeout=40)
    finally:
        sub.close()
        d.close()
    store = Store(using.database)
    first, second = store.get_batch(one.batch.id), store.get_batch(two.batch.id)
    assert first is not None and second is not None
    assert first.state == second.state == "done"
    assert first.finished_at is not None and second.started_at is not None
    assert second.started_at >= first.finished_at, "the two batches overlapped"


@pytest.mark.timeout(180)
def test_cancel_stops_the_running_server_while_it_loads(using: Site, main_worker: Worker) -> None:
    d = dispatcher(using)
    sub = d.subscribe()
    try:
        submitted = d.submit(plan_batch("standin-slow", queue="main"), requested_by="U1")
        batch = submitted.batch.id
        collect(sub, is_phase(batch, 2, "launching"), timeout=30)
        wait_until(leftovers, timeout=60, what="the slow server loading")
        done = cli(using, "cancel", batch)
        assert done.returncode == 0, done.stderr
        # the second's server takes an hour to load: only the cancel can end the batch in the
        # test's time, and it ends with the server still loading (no "ready" phase of it)
        events = collect(sub, is_end(batch), timeout=120)
    finally:
        sub.close()
        d.close()
    assert not [e for e in events if e["type"] == "approach.phase" and e["index"] == 2
                and e["phase"] == "ready"]
    assert events[-1]["type"] == "batch.cancelled" and events[-1]["report"] is not None
    store = Store(using.database)
    assert store.get_batch(batch).state == "cancelled"  # type: ignore[union-attr]
    assert [(r.approach, r.status) for r in store.records(batch)] == [
        ("baseline", "ok"), ("second", "cancelled"), ("third", "skipped")]
    assert leftovers() == []


@pytest.mark.timeout(180)
def test_status_says_when_no_live_worker_serves_a_queue(using: Site) -> None:
    d = dispatcher(using)
    try:
        submitted = d.submit(plan_batch("standin", queue="nobody"), requested_by="U1")
        assert submitted.live_workers == 0
        text, as_json = clis(using, ("status",), ("status", "--format", "json"))
        assert "no live worker serves queue nobody" in text.stdout, text.stdout + text.stderr
        [queue] = [q for q in json.loads(as_json.stdout)["queues"] if q["queue"] == "nobody"]
        assert queue["live_workers"] == 0
        assert queue["batches"][0]["batch"] == submitted.batch.id
        assert queue["batches"][0]["position"] == 1
    finally:
        d.cancel(submitted.batch.id)
        d.close()


@pytest.mark.timeout(90)
def test_a_killed_worker_resumes_its_batch_and_leaves_no_server(using: Site) -> None:
    with killed_worker(using, "crash") as run:
        batch = run.submit(plan_batch("standin-reps", queue="crash"))
        run.wait(is_phase(batch, 2, "ready", "repetition"), timeout=30)
        run.worker.kill9()
        orphans = leftovers()
        assert orphans, "the dead worker's server should outlive it"
        events = run.resume(timeout=40)
    restarted = run.restarted
    assert restarted is not None
    assert re.search(r"killed [12] server group", restarted.output())
    assert events[-1]["type"] == "batch.finished"
    launches = [e["index"] for e in events if e["type"] == "approach.phase"
                and e["phase"] == "launching"]
    # the second, the third, then the baseline's closing run (docs/contracts.md "Noise,
    # measured"): its first run is not repeated
    assert launches == [2, 3, 4], "the baseline must not run again but last; the second must"
    store = Store(using.database)
    records = store.records(batch)
    assert [(r.approach, r.status) for r in records] == [
        ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
    assert store.get_batch(batch).state == "done"  # type: ignore[union-attr]
    assert leftovers() == []


@pytest.mark.timeout(90)
def test_a_redis_restart_mid_batch_loses_no_record(using: Site, tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server binary to run a private Redis")
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
            "--bind", "127.0.0.1", "--dir", str(tmp_path)]

    def start_redis() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        def ready() -> bool:
            try:
                return bool(redis.Redis(port=port, socket_connect_timeout=0.2).ping())
            except redis.RedisError:
                return False

        wait_until(ready, timeout=60, what="private redis", alive=proc)
        return proc

    server = start_redis()
    broker = f"redis://127.0.0.1:{port}/0"
    worker = Worker(using, "flaky", broker=broker)
    d = dispatcher(using, broker)
    try:
        sub = d.subscribe()
        batch = d.submit(plan_batch("standin-reps", queue="flaky"), requested_by="U1").batch.id
        collect(sub, is_phase(batch, 2, "ready"), timeout=30)
        server.terminate()
        server.wait(timeout=10)
        time.sleep(0.5)
        server = start_redis()
        store = Store(using.database)
        row = wait_until(lambda: (r := store.get_batch(batch)) and r.state == "done" and r,
                         timeout=40, what="the batch to finish")
        assert row.report is not None
        assert [(r.approach, r.status) for r in store.records(batch)] == [
            ("baseline", "ok"), ("second", "ok"), ("third", "ok")]
        # The worker still serves its queue on the restarted Redis.
        after = d.submit(plan_batch("standin", queue="flaky"), requested_by="U1").batch.id
        wait_until(lambda: (r := store.get_batch(after)) and r.state == "done", timeout=40,
                   what="a batch sent after the restart")
        sub.close()
    finally:
        d.close()
        worker.stop()
        server.terminate()
        server.wait(timeout=10)
    assert leftovers() == []


@pytest.mark.timeout(120)
def test_an_unreachable_broker_fails_fast_and_stores_nothing(using: Site, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'empty.db'}"
    env = using.worker_env(f"redis://127.0.0.1:{free_port()}/0")
    env["SPECBENCH_DATABASE_URL"] = database
    # `run` waits a day for its batch by default: exit 1 within the test's time is the refusal
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "standin"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=100)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the broker at redis://127.0.0.1:" in lines[0]
    assert Store(database).list_batches() == []


@pytest.mark.timeout(180)
def test_cancel_of_an_unknown_batch_is_bad_input(using: Site) -> None:
    done = cli(using, "cancel", "b-unknown")
    assert done.returncode == 2
    assert done.stderr.strip() == "specbench cancel: error: unknown batch 'b-unknown'"


@pytest.mark.timeout(180)
def test_a_worker_logs_its_start_and_keeps_its_heartbeat(site: Site, tmp_path: Path) -> None:
    from jobs import __version__

    own = Site(root=site.root, broker=site.broker,
               env={**site.env, "SPECBENCH_DATA_DIR": str(tmp_path / "data")})

    def health() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jobs.ops.health", "worker"],
                              env=own.worker_env(), cwd=REPO, capture_output=True, text=True,
                              timeout=30)

    assert health().returncode == 1  # no worker yet
    worker = Worker(own, "heartbeat")
    try:
        beat = tmp_path / "data" / "heartbeat" / "worker"
        wait_until(beat.is_file, timeout=60, what="the worker's heartbeat file")
        assert json.loads(beat.read_text())["pid"] == worker.proc.pid
        check = health()
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        worker.stop()
    assert f"specbench {__version__} worker starting (distributed mode" in worker.output()
    assert not beat.exists() and health().returncode == 1  # a stopped worker is not healthy
