"""Issue 4's figures: submission → first event latency with an idle worker, event publish →
consumer latency through the Redis Stream, and the throughput of 1,000 trivial submissions.

It starts its own `specbench worker` on a Redis database of its own (127.0.0.1:6379) and a
SQLite store in a temporary folder, and removes them after. The trivial batch's configurations
use a flag the (stand-in) SGLang does not know, so each is recorded `failed` at preflight without
a server: what is measured is the pipeline, not a benchmark.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "standin"
TRIVIAL = """\
name: trivial
description: a batch the worker refuses at preflight
engine: sglang
queue: bench
metric: output_throughput
reps: 1
bench: {num-prompts: 1}
baseline:
  server_args: {model-path: /models/none, no-such-flag: 1}
approaches:
  - name: also-bad
    hypothesis: nothing
    server_args: {another-bad-flag: 1}
"""


def _free_db() -> tuple[redis.Redis, int]:
    token = secrets.token_hex(8)
    for db in range(15, 0, -1):
        client = redis.Redis("127.0.0.1", 6379, db=db)
        if client.dbsize() == 0 and client.set("specbench:bench-owner", token, nx=True, ex=900):
            return client, db
    raise RuntimeError("no free Redis database on 127.0.0.1:6379")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def _ms(values: list[float]) -> str:
    return (f"p50 {_pct(values, 0.5) * 1000:.1f} ms, p99 {_pct(values, 0.99) * 1000:.1f} ms "
            f"(n={len(values)})")


def run() -> dict[str, str]:
    client, db = _free_db()
    root = Path(tempfile.mkdtemp(prefix="specbench-bench-"))
    url = f"redis://127.0.0.1:6379/{db}"
    config = root / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "trivial.yaml").write_text(TRIVIAL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update({
        "SPECBENCH_BROKER_URL": url, "SPECBENCH_DATABASE_URL": f"sqlite:///{root / 'db.sqlite'}",
        "SPECBENCH_DATA_DIR": str(root / "data"), "SPECBENCH_CONFIG_DIR": str(config),
        "SPECBENCH_SGLANG_PYTHON": sys.executable, "SPECBENCH_DIGEST_SCHEDULE": "off",
        "SPECBENCH_LOG_LEVEL": "WARNING", "PYTHONPATH": f"{STANDIN}{os.pathsep}{REPO}",
    })
    saved = dict(os.environ)
    os.environ.update(env)
    log = open(root / "worker.log", "w")  # noqa: SIM115 - closed below
    worker = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "worker", "--queue", "bench"],
                              env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        return _measure(url, client, root)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()
        os.environ.clear()
        os.environ.update(saved)
        client.flushdb()
        shutil.rmtree(root, ignore_errors=True)


def _measure(url: str, client: redis.Redis, root: Path) -> dict[str, str]:
    from jobs.batches.planning import plan_batch
    from jobs.broker.dispatcher import DistributedDispatcher
    from jobs.store import Store

    deadline = time.monotonic() + 30
    while not client.keys("specbench:worker:bench:*"):
        if time.monotonic() > deadline:
            raise RuntimeError((root / "worker.log").read_text())
        time.sleep(0.05)
    store = Store()
    dispatcher = DistributedDispatcher(store, url)
    plan = plan_batch("trivial")
    figures: dict[str, str] = {}

    # 1. submission → first event from the worker (batch.started), the worker idle each time
    sub = dispatcher.subscribe()
    started: list[float] = []
    queued: list[float] = []
    for n in range(32):  # each trivial batch costs ~2 s of host fingerprinting on the worker
        begun = time.perf_counter()
        batch = dispatcher.submit(plan, requested_by="bench").batch.id
        while True:
            event = sub.get(timeout=10)
            if event is None:
                raise RuntimeError("no event within 10 s")
            if event["batch"] != batch:
                continue
            if event["type"] == "batch.queued" and n >= 2:  # the first two warm up
                queued.append(time.perf_counter() - begun)
            # The worker's first word: the trivial batch's baseline is refused at preflight
            # (state refused, no batch.started) since preflight became the worker's.
            first = event["type"] == "batch.started" or (
                event["type"] == "batch.finished" and event.get("state") == "refused")
            if first and n >= 2 and len(started) < n - 1:
                started.append(time.perf_counter() - begun)
            if event["type"] in ("batch.finished", "batch.cancelled"):
                break
    sub.close()
    figures["submit → batch.queued seen"] = _ms(queued)
    figures["submit → the worker's first event (idle worker)"] = _ms(started)

    # 2. event publish → consumer, through the stream
    figures["event publish → consumer"] = _stream_latency(url)

    # 3. 1,000 trivial submissions: store + task send; then until the worker has run them all
    begun = time.perf_counter()
    ids = [dispatcher.submit(plan, requested_by="bench").batch.id for _ in range(1000)]
    sent = time.perf_counter() - begun
    figures["1,000 submissions (store + send)"] = f"{1000 / sent:.0f} submissions/s ({sent:.1f} s)"
    # The worker has been draining them meanwhile; give it 15 s more, then count.
    time.sleep(15)
    took = time.perf_counter() - begun
    ended = ("done", "failed", "refused")
    done = sum(1 for r in store.list_batches(states=ended) if r.id in set(ids))
    figures["worker drain of those (1 worker)"] = (
        f"{done / took:.1f} trivial batches/s ({done} of 1,000 ended in {took:.0f} s)")
    assert len(set(ids)) == 1000
    dispatcher.close()
    store.close()
    return figures


def _stream_latency(url: str, count: int = 1000) -> str:
    from jobs.broker.sink import StreamSink
    from jobs.broker.streams import StreamSubscription, connect
    from jobs.core.events import make_event

    sub = StreamSubscription(connect(url), stream="specbench:bench-latency")
    received: list[float] = []

    def consume() -> None:
        while len(received) < count:
            event: dict[str, Any] | None = sub.get(timeout=5)
            if event is None:
                return
            received.append(time.time() - float(event["sent"]))

    reader = threading.Thread(target=consume)
    reader.start()
    sink = StreamSink(connect(url), stream="specbench:bench-latency")
    for n in range(count):
        sink.emit(make_event("approach.phase", "b-bench", n=n, sent=time.time()))
        if n % 10 == 0:
            time.sleep(0.001)  # a realistic trickle, not one burst
    reader.join(timeout=30)
    sub.close()
    return _ms(received) + f", mean {statistics.fmean(received) * 1000:.2f} ms"


if __name__ == "__main__":
    for key, value in run().items():
        print(f"{key}: {value}")
