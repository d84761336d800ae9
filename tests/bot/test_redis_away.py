"""Redis away (issue 10, item 4; issue 20, item 4): the store is the truth and events are
notifications, so a batch neither waits for Redis nor is lost without it.

- `specbench run` (or `specbench console -c "run ..."`) whose Redis goes away as its batch ends
  polls the store and ends with the stored report.
- A worker whose Redis goes away mid-batch runs the rest without it (events are sent from the
  sink's own thread, jobs.broker.sink), and once Redis answers again the events the summary
  needs arrive, in order. That an emit never waits on Redis is tests/jobs/test_streams.py's
  ordering proof; the pace with Redis away is a figure of `make bench` (bench_redis_away).
- A chat `run` while Redis is away is answered: it cannot reach the broker.

Real processes: a redis-server of each test's own on a free port (killed mid-batch, started
again), `specbench worker`, `specbench run`/`console`, `specbench bot --http` with the Slack
stand-in. Waits are on conditions (store rows, log lines, recorded calls), never fixed sleeps,
and their timeouts only stop a test that would hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.broker.streams import STREAM
from jobs.store import TERMINAL_STATES, Store
from tests.bot.test_distributed_bot import Bot
from tests.builders import standin_preset
from tests.jobs.test_distributed import REPO, Site, Worker, make_site, wait_until
from tests.standin.redis_server import RedisServer
from tests.standin.slack_api import SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = standin_preset(
    "standin-away", description="a stand-in batch that ends after its Redis went away",
    queue="awayq", env={"STANDIN_STARTUP_S": "0.2"},
    approaches=[{"name": "after-redis", "hypothesis": "runs once Redis is gone",
                 "env": {"STANDIN_THROUGHPUT": "90", "STANDIN_STARTUP_S": "1"}}],
)

# The baseline runs with Redis, the other two without it, and each emits a phase per step
# (launching, ready, warm-up, its repetition, stopping): progress that queues while Redis is away.
PACE = standin_preset(
    "standin-pace", description="configurations that run with and without Redis",
    queue="paceq", reps=1, env={"STANDIN_STARTUP_S": "0.2"},
    approaches=[
        {"name": "away-1", "hypothesis": "runs while Redis is away",
         "env": {"STANDIN_THROUGHPUT": "90"}},
        {"name": "away-2", "hypothesis": "runs while Redis is away too",
         "env": {"STANDIN_THROUGHPUT": "80"}},
    ],
)


@pytest.fixture
def away(tmp_path: Path) -> Iterator[tuple[Site, RedisServer]]:
    server = RedisServer(tmp_path)
    site = make_site(tmp_path, server.url, {"standin-away": PRESET, "standin-pace": PACE})
    try:
        yield site, server
    finally:
        server.kill()


def cli(site: Site, argv: list[str], root: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = root / "run.out", root / "run.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", *argv, "--timeout", "600"],
                                env=site.worker_env(), cwd=REPO, stdout=stdout, stderr=stderr)
    return proc, out, err


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


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
    proc, out, err = cli(site, argv, tmp_path)
    try:
        rows = wait_until(lambda: store.list_batches(), timeout=30, what="the batch",
                          alive=proc)
        batch = rows[0].id
        wait_until(lambda: store.records(batch), timeout=60, what="the baseline's record",
                   alive=proc)
        server.kill()  # the worker's task is already delivered: the batch runs on
        row = wait_until(lambda: (r := store.get_batch(batch)) is not None
                         and r.state in TERMINAL_STATES and r, timeout=120,
                         what="the batch to end in the store")
        rc = proc.wait(timeout=120)  # a wait that timed out (600 s) would exit 1
    finally:
        stop(proc)
        worker.stop()
    assert row.state == "done" and row.report is not None
    report = out.read_text()
    assert rc == 0, err.read_text()[-2000:]
    assert batch in report and "after-redis" in report and "baseline" in report
    if surface == "run":
        assert "from the store" in err.read_text()
    else:  # the console's thread saw the end in the store and posted its summary
        assert "Next steps" in report
    assert "Traceback" not in err.read_text()


def stream_events(server: RedisServer, batch: str) -> list[tuple[str, str | None]]:
    entries = server.client().xrange(STREAM)
    events = [json.loads(fields[b"event"]) for _, fields in entries]
    return [(e["type"], e.get("approach")) for e in events if e.get("batch") == batch]


@pytest.mark.timeout(200)
def test_a_worker_runs_on_with_redis_away_and_sends_the_ends_once_it_is_back(
    away: tuple[Site, RedisServer], tmp_path: Path
) -> None:
    site, server = away
    worker = Worker(site, "paceq")
    store = Store(site.database)
    proc, out, err = cli(site, ["run", "standin-pace"], tmp_path)
    try:
        batch = wait_until(lambda: store.list_batches(), timeout=30, what="the batch",
                           alive=proc)[0].id
        wait_until(lambda: ("approach.finished", "baseline") in stream_events(server, batch),
                   timeout=60, what="the baseline's end on the stream", alive=proc)
        server.kill()  # after the baseline's end was sent: what follows is queued while away
        log = worker.logged(f"run_batch {batch}: ran", timeout=120)
        assert f"run_batch {batch}: ran" in log, log[-3000:]  # the batch ran on without Redis
        rc = proc.wait(timeout=120)
        server.start()  # empty (no persistence): what arrives now was queued by the worker
        wait_until(lambda: ("batch.finished", None) in stream_events(server, batch),
                   timeout=30, what="the batch's end on the stream once Redis is back")
        events = stream_events(server, batch)
    finally:
        stop(proc)
        worker.stop()
    assert [r.status for r in store.records(batch)] == ["ok"] * 3
    assert rc == 0, err.read_text()[-2000:]
    # the events the summary needs arrive, in order; progress is coalesced while away
    lasting = [e for e in events if e[0] != "approach.phase"]
    assert lasting == [("approach.finished", "away-1"), ("approach.finished", "away-2"),
                       ("approach.finished", "baseline (last)"), ("batch.finished", None)], events
    assert len(events) - len(lasting) <= 3, events


@pytest.mark.timeout(120)
def test_a_chat_run_while_redis_is_away_says_it_cannot_reach_the_broker(
    away: tuple[Site, RedisServer], standin: SlackStandin
) -> None:
    site, server = away
    bot = Bot(site, standin)
    store = Store(site.database)
    try:
        assert bot.command("run standin-away").status_code == 200  # queued: no worker needed
        wait_until(lambda: len(store.list_batches()) == 1, timeout=30, what="the first batch")
        standin.wait_for(lambda cs: any(c.method == "chat.postMessage" for c in cs), timeout=60)
        server.kill()
        answers: list[str] = []
        for attempt in range(2):  # a known broker (no ping), then one pinged again
            assert bot.command("run standin-away").status_code == 200
            calls = standin.wait_for(lambda cs, n=attempt: len(
                [c for c in cs if c.method == "chat.postEphemeral"]) > n)
            answers.append([c for c in calls if c.method == "chat.postEphemeral"][-1]
                           .body["text"].strip())
        assert bot.command("help").status_code == 200
        standin.wait_for(lambda cs: len([c for c in cs if c.method == "chat.postEphemeral"])
                         > 2)
    finally:
        bot.stop()
    for text in answers:
        assert f"cannot reach the broker at redis://127.0.0.1:{server.port}/0" in text, text
        assert "\n" not in text, text
    assert len(store.list_batches()) == 1  # nothing stored for the refused runs
    assert "background work failed" not in bot.output()  # the silence it used to be
