"""`specbench run` does not wait forever when Redis goes away as its batch ends (issue 10,
item 4): the store is the truth, and the CLI polls it while it waits for events.

Real processes: a redis-server of this test's own on a free port (killed mid-batch), a
`specbench worker` (its task already delivered, so the batch runs on and ends in the store; its
end event is dropped), and `specbench run` (or `specbench console -c "run ..."`) itself.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.commands import END_GRACE_S, STORE_POLL_S
from jobs.engines.procs import free_port
from jobs.store import TERMINAL_STATES, Store
from tests.jobs.test_distributed import REPO, Site, Worker, make_site, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = """\
name: standin-away
description: a stand-in batch that ends after its Redis went away
engine: sglang
queue: awayq
metric: output_throughput
min_effect_pct: 2.0
reps: 1
timeouts: {startup_s: 60, bench_s: 20}
bench: {dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}
overridable: []
baseline:
  server_args: {model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                cuda-graph-max-bs: 8}
  env: {STANDIN_STARTUP_S: "0.2"}
approaches:
  - name: after-redis
    hypothesis: runs once Redis is gone
    env: {STANDIN_THROUGHPUT: "90", STANDIN_STARTUP_S: "1"}
"""


class RedisServer:
    """A redis-server of our own, no persistence: killing it loses everything, as a crash
    would."""

    def __init__(self, root: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("no redis-server on PATH")
        self.port = free_port()
        self.log = open(root / f"redis-{self.port}.log", "w")  # noqa: SIM115 - closed in kill()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        wait_until(self._answers, timeout=10, what="redis-server to answer", alive=self.proc)

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def away(tmp_path: Path) -> Iterator[tuple[Site, RedisServer]]:
    server = RedisServer(tmp_path)
    site = make_site(tmp_path, server.url, {"standin-away": PRESET})
    try:
        yield site, server
    finally:
        server.kill()


@pytest.mark.timeout(200)
@pytest.mark.parametrize("surface", ["run", "console"])
def test_run_ends_with_the_stored_report_when_redis_is_gone_at_the_end(
    away: tuple[Site, RedisServer], tmp_path: Path, surface: str
) -> None:
    site, server = away
    argv = (["run", "standin-away"] if surface == "run"
            else ["console", "-c", "run standin-away"])
    worker = Worker(site, "awayq")
    store = Store(site.database)
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        cli = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", *argv, "--timeout", "600"],
            env=site.worker_env(), cwd=REPO, stdout=stdout, stderr=stderr)
    try:
        rows = wait_until(lambda: store.list_batches(), timeout=30, what="the batch",
                          alive=cli)
        batch = rows[0].id
        wait_until(lambda: store.records(batch), timeout=60, what="the baseline's record",
                   alive=cli)
        server.kill()  # the worker's task is already delivered: the batch runs on
        row = wait_until(lambda: (r := store.get_batch(batch)) is not None
                         and r.state in TERMINAL_STATES and r, timeout=120,
                         what="the batch to end in the store")
        ended = time.monotonic()
        rc = cli.wait(timeout=STORE_POLL_S + END_GRACE_S + 20)
        waited = time.monotonic() - ended
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        worker.stop()
    assert row.state == "done" and row.report is not None
    report = out.read_text()
    assert rc == 0, err.read_text()[-2000:]
    assert waited < STORE_POLL_S + END_GRACE_S + 5, f"exited {waited:.1f} s after the end"
    assert batch in report and "after-redis" in report and "baseline" in report
    if surface == "run":
        assert "from the store" in err.read_text()
    else:  # the console's thread saw the end in the store and posted its summary
        assert "Next steps" in report
    assert "Traceback" not in err.read_text()
