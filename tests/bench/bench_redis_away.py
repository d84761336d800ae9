"""Issue 20's Redis-away figure: how much slower a worker runs a batch while Redis is away
(target: under 5% of the batch's time), printed as a ratio.

Each round runs the same stand-in batch (three alike configurations, 3 repetitions each, every
step a progress event) on a fresh redis-server of its own and a fresh `specbench worker`: once
with Redis up throughout, once with Redis killed as soon as the worker has taken the batch. A
batch's time is the store's (started_at to finished_at, set by the worker); the ratio is the
median over rounds of away / up, and the worker's own CPU time per batch is given too (the
machine's other load moves wall times by several per cent either way). Also: what one emit
costs against an unreachable Redis, and what the blocking emit it replaced would have added
(3 s per event, 30 s for the end, from the events the normal batch sent). And the direct
figure: the batch run by `execute_batch` in this process with a sink whose Redis never answers,
the time its own thread spent in emit.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.builders import standin_preset

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "standin"
ROUNDS = 3
PRESET = standin_preset(
    "pace", description="configurations alike in cost, timed with and without Redis",
    queue="paceq", reps=3, env={"STANDIN_STARTUP_S": "0.5"},
    approaches=[{"name": "second", "hypothesis": "alike", "env": {"STANDIN_THROUGHPUT": "90"}},
                {"name": "third", "hypothesis": "alike", "env": {"STANDIN_THROUGHPUT": "80"}}],
)


def run() -> dict[str, str]:
    root = Path(tempfile.mkdtemp(prefix="specbench-redis-away-"))
    config = root / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "pace.yaml").write_text(PRESET)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "STANDIN_"))}
    env.update({
        "SPECBENCH_DATABASE_URL": f"sqlite:///{root / 'db.sqlite'}",
        "SPECBENCH_DATA_DIR": str(root / "data"), "SPECBENCH_CONFIG_DIR": str(config),
        "SPECBENCH_SGLANG_PYTHON": sys.executable, "SPECBENCH_DIGEST_SCHEDULE": "off",
        "SPECBENCH_LOG_LEVEL": "WARNING", "PYTHONPATH": f"{STANDIN}{os.pathsep}{REPO}",
    })
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from jobs.store import Store

        Store().migrate()
        normal: list[float] = []
        away: list[float] = []
        events = 0
        for n in range(ROUNDS):  # in turns, so that a drift in the machine's load evens out
            for kill in (False, True) if n % 2 == 0 else (True, False):
                took, sent = _batch(env, root, kill_redis=kill)
                (away if kill else normal).append(took)
                events = max(events, sent)
        per_emit_us = _emit_cost()
        emitting, whole, emitted = _emit_share()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)
    ratio = statistics.median(a / b for a, b in zip(away, normal, strict=True))
    old = (events - 2) * 3.0 + 30.0  # each phase/result 3 s, the end 30 s (queued/started before)
    return {
        "worker slowdown with Redis away (ratio)": (
            f"{ratio:.3f}x ({(ratio - 1) * 100:+.1f}% of the batch's time, median of {ROUNDS} "
            f"pairs; best of each {min(away) / min(normal):.3f}x; target < 5%)"),
        "batch time, Redis up / away (s)": (
            f"{', '.join(f'{t:.2f}' for t in normal)} / {', '.join(f'{t:.2f}' for t in away)}"),
        "worker CPU per batch, Redis up / away (s)": (
            f"{statistics.median(CPU[False]):.2f} / {statistics.median(CPU[True]):.2f}"),
        "time the batch spent emitting, Redis away": (
            f"{emitting * 1000:.1f} ms of {whole:.1f} s ({emitting / whole * 100:.3f}%, "
            f"{emitted} events; execute_batch in this process)"),
        "one emit with Redis unreachable": f"{per_emit_us:.0f} us (queued, never waits)",
        "what the blocking emit would have added": (
            f"~{old:.0f} s to a {statistics.median(normal):.1f} s batch ({events} events)"),
    }


def _batch(env: dict[str, str], root: Path, *, kill_redis: bool) -> tuple[float, int]:
    """One batch on a fresh Redis and worker: its time in the store, and the events it sent
    (counted while Redis was up)."""
    from jobs.batches.planning import plan_batch
    from jobs.broker.dispatcher import DistributedDispatcher
    from jobs.broker.streams import STREAM
    from jobs.store import TERMINAL_STATES, Store
    from tests.standin.redis_server import RedisServer

    server = RedisServer(root)
    log = open(root / f"worker-{server.port}.log", "w")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "worker", "--queue", "paceq"],
        env={**env, "SPECBENCH_BROKER_URL": server.url}, cwd=REPO, stdout=log,
        stderr=subprocess.STDOUT)
    store = Store()
    dispatcher = DistributedDispatcher(store, server.url)
    try:
        batch = dispatcher.submit(plan_batch("pace"), requested_by="bench").batch.id
        row = _wait(lambda: (r := store.get_batch(batch)) is not None and r.state != "queued"
                    and r, what="the worker to take the batch", timeout=60)
        cpu = _cpu_s(worker.pid)
        if kill_redis:
            server.kill()
        row = _wait(lambda: (r := store.get_batch(batch)) is not None
                    and r.state in TERMINAL_STATES and r, what="the batch to end", timeout=300)
        CPU[kill_redis].append(_cpu_s(worker.pid) - cpu)
        if row.state != "done" or row.started_at is None or row.finished_at is None:
            raise RuntimeError(f"batch {batch} ended {row.state}")
        sent = 0 if kill_redis else len(server.client().xrange(STREAM) or [])
        return (row.finished_at - row.started_at).total_seconds(), sent
    finally:
        dispatcher.close()
        store.close()
        worker.send_signal(signal.SIGKILL)  # the batch has ended: nothing of it is running
        worker.wait(timeout=10)
        log.close()
        server.kill()


CPU: dict[bool, list[float]] = {False: [], True: []}  # the worker's CPU seconds per batch


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU time so far (its own, not its children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(check: Any, *, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.01)
    raise RuntimeError(f"timed out waiting for {what}")


class _TimedSink:
    """A sink that times what each emit costs its caller (the batch's own thread)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.spent, self.count = inner, 0.0, 0

    def emit(self, event: Any) -> None:
        begun = time.perf_counter()
        self.inner.emit(event)
        self.spent += time.perf_counter() - begun
        self.count += 1


def _emit_share() -> tuple[float, float, int]:
    """The pace batch run by execute_batch in this process, its sink on a Redis that never
    answers: seconds spent in emit, the batch's seconds, and the events emitted."""
    from jobs.batches.execution import execute_batch
    from jobs.batches.planning import plan_batch, submit
    from jobs.broker.sink import StreamSink
    from jobs.broker.streams import connect
    from jobs.engines.procs import free_port
    from jobs.store import Store

    quiet = logging.getLogger("jobs.broker.sink")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    store = Store()
    sink = _TimedSink(StreamSink(connect(f"redis://127.0.0.1:{free_port()}/0", timeout_s=1.0)))
    try:
        row, _ = submit(plan_batch("pace"), store=store, requested_by="bench")
        begun = time.perf_counter()
        execute_batch(row.id, store=store, sink=sink)
        whole = time.perf_counter() - begun
    finally:
        sink.inner.close(timeout=0.1)
        store.close()
        quiet.setLevel(level)
    return sink.spent, whole, sink.count


def _emit_cost(count: int = 2000) -> float:
    """Mean microseconds one emit takes with Redis unreachable."""
    from jobs.broker.sink import StreamSink
    from jobs.broker.streams import connect
    from jobs.core.events import make_event
    from jobs.engines.procs import free_port

    quiet = logging.getLogger("jobs.broker.sink")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its one warning per outage is not a figure
    sink = StreamSink(connect(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.2))
    begun = time.perf_counter()
    for n in range(count):
        sink.emit(make_event("approach.phase", "b-bench", phase="repetition", rep=n))
    took = time.perf_counter() - begun
    sink.close(timeout=0.1)
    quiet.setLevel(level)
    return took / count * 1e6


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key}: {value}")
