"""The regression watch over a simulated history, through the real scheduler and worker
(docs/contracts.md "Regression watch"): `python -m bot.slack.beat` ticks, a `specbench worker`
runs each night's batch on the stand-in SGLang and its confirmation, the beat tells the watch's
thread (the Slack stand-in). Nights are driven by the watch's clock (SPECBENCH_WATCH_CLOCK_FILE);
each night's throughput, release and GPU by the stand-in host's nightly environment
(STANDIN_ENV_FILE, tests/standin/standin_host.py), a potential confirmation measuring its own
noise draw (the env file's `later`).

The history: 20 noise-only nights (2% a night), then a 10% step that comes with an engine
release, which is alerted on its first night, naming the release, and then dismissed; then a
one-night 10% dip whose confirmation comes back ("not confirmed: a one-night blip"); then a GPU
change with a 20% step (an environment change, not a regression). The values are drawn from a
fixed seed: the test waits on the scheduler's claims and the thread's lines, never on a timing.
Twenty old points are enough: at n0 = 20 the contract's one-night candidate threshold is 3.98
old-segment deviations and its confirmation 2.63; a 10% step at 2% noise is 5. `watch add` and
`watch dismiss` run in this process (tests/builders.py `specbench_here`): they need no process
of their own; the beat and the worker that act on what they store are real processes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.store import TERMINAL_STATES, Store
from tests.builders import specbench_here
from tests.jobs.test_distributed import REPO, Site, Worker, make_site, redis_db, wait_until
from tests.standin.harness import STANDIN
from tests.standin.slack_api import SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = """\
name: nightly
description: the stand-in's nightly benchmark
engine: sglang
queue: nightly
metric: output_throughput
min_effect_pct: 2.0
reps: 1
warmup: false
timeouts: {startup_s: 60, bench_s: 20}
bench: {dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}
overridable: []
baseline:
  server_args: {model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                cuda-graph-max-bs: 8}
  env: {STANDIN_STARTUP_S: "0.05", STANDIN_HEALTH_S: "0.05"}
approaches:
  - name: chunked
    hypothesis: a smaller prefill chunk changes nothing the host does not
    server_args: {chunked-prefill-size: 4096}
"""
# SEED: its draws, judged by jobs/core/watch's find_candidate and confirms on these values
# (both series measure the night's STANDIN_THROUGHPUT), give exactly three candidates: the step
# on its first night (t = -6.8 against t_crit 3.88 at 20 old points; -10.3% with its
# confirmation), the dip (its confirmation back at 915) and the GPU change; none among the 20
# noise nights nor between. 24 of seeds 0-49 give that history; 7 has the widest margins of
# the first ones.
SEED = 7
NOISE_NIGHTS, STEP_NIGHT, DIP_NIGHT, GPU_NIGHT = 20, 20, 26, 31
START = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)  # the watch runs daily at 02:00 UTC
CHANNEL, THREAD = "C_LAB", "1700000000.000001"


def history() -> list[dict[str, Any]]:
    """Each night's environment: its level, release and GPU, a 2% noise draw for the night and
    one for its confirmation; the dip night's batch alone is 10% slow. The levels are tokens/s
    of the stand-in, whose figures are its load model's, not the clock's: at 1,000 its server
    holds each request 4 ms instead of 40, a third of each night's batch."""
    rng = random.Random(SEED)
    nights = []
    for i in range(GPU_NIGHT + 1):
        level = 1000.0 if i < STEP_NIGHT else 900.0 if i < GPU_NIGHT else 720.0
        value = round(level * (1 + 0.02 * rng.gauss(0, 1)), 2)
        again = round(level * (1 + 0.02 * rng.gauss(0, 1)), 2)
        if i == DIP_NIGHT:
            value = round(value * 0.9, 2)
        nights.append({"env": {"STANDIN_THROUGHPUT": f"{value}",
                               "STANDIN_VERSION": "0.5.2" if i < STEP_NIGHT else "0.5.3",
                               "STANDIN_GPU_NAME": "NVIDIA H200" if i < GPU_NIGHT
                               else "NVIDIA H100 80GB HBM3"},
                       "later": {"after": 2, "env": {"STANDIN_THROUGHPUT": f"{again}"}}})
    return nights


@pytest.fixture(scope="module")
def slack() -> Iterator[SlackStandin]:
    server = SlackStandin().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, slack: SlackStandin) -> Iterator[Site]:
    gen = redis_db()
    root = tmp_path_factory.mktemp("watch")
    made = make_site(root, next(gen), {"nightly": PRESET})
    made.env.update({
        "STANDIN_ENV_FILE": str(root / "night.json"),
        "SPECBENCH_WATCH_CLOCK_FILE": str(root / "clock"),
        "SPECBENCH_WATCH_TICK_S": "0.2",
        "PATH": f"{smi_dir(root)}{os.pathsep}{os.environ['PATH']}",  # its nvidia-smi
        "SLACK_BOT_TOKEN": "xoxb-watch-test", "SLACK_API_URL": slack.url,
    })
    set_clock(made, START - dt.timedelta(hours=1))
    yield made
    next(gen, None)


def smi_dir(root: Path) -> Path:
    """A folder whose nvidia-smi is the stand-in's, run by this interpreter without its site:
    its own `#!/usr/bin/env python3` goes through pyenv's shell shims, 60 ms a call, some 100
    calls a history."""
    folder = root / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    real = str(STANDIN / "bin" / "nvidia-smi")
    smi.write_text(f"#!{sys.executable} -S\nimport runpy\n"
                   f"runpy.run_path({real!r}, run_name='__main__')\n")
    smi.chmod(0o755)
    return folder


class Beat:
    """`python -m bot.slack.beat`, its output in a log file."""

    def __init__(self, site: Site) -> None:
        self.log = site.root / f"beat-{time.monotonic_ns()}.log"
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.slack.beat"],
                                     env=site.worker_env(), cwd=REPO, stdout=self._out,
                                     stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def set_clock(site: Site, at: dt.datetime) -> None:
    (site.root / "clock").write_text(at.isoformat())


def set_night(site: Site, night: dict[str, Any]) -> None:
    path = site.root / "night.json"
    Path(str(path) + ".starts").write_text("")
    path.write_text(json.dumps(night))


def cli(site: Site, *args: str) -> subprocess.CompletedProcess[str]:
    """`specbench ARGS` in a process of its own, with the environment the site's processes have
    (for a module's fixture, which has no capsys)."""
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args],
                          env=site.worker_env(), cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def here(capsys: pytest.CaptureFixture[str], site: Site,
         *args: str) -> subprocess.CompletedProcess[str]:
    """`specbench ARGS` in this process, with the environment the site's processes have."""
    return specbench_here(capsys, *args, env=site.worker_env(), drop=("SPECBENCH_", "STANDIN_"),
                          cwd=REPO)


def thread_texts(slack: SlackStandin) -> list[str]:
    return [str(c.body.get("text")) for c in slack.recorded("chat.postMessage")
            if c.body.get("thread_ts") == THREAD]


def alerts(slack: SlackStandin) -> list[dict[str, Any]]:
    """The alerts posted: the thread's messages with buttons."""
    return [c.body for c in slack.recorded("chat.postMessage")
            if c.body.get("thread_ts") == THREAD
            and any(b.get("type") == "actions" for b in _blocks(c.body))]


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = body.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def run_night(site: Site, slack: SlackStandin, store: Store, watch: int, i: int,
              night: dict[str, Any]) -> str:
    """Night `i`: its environment set, the clock at its slot; the batch the beat started,
    once the thread has its end line."""
    set_night(site, night)
    slot = START + dt.timedelta(days=i)
    set_clock(site, slot)
    row = wait_until(lambda: (w := store.get_watch(watch)) and w.last_slot == slot and w,
                     timeout=30, what=f"the beat to start night {i}")
    batch = str(row.last_batch)
    wait_until(lambda: any(t.startswith(f"Batch {batch} ") for t in thread_texts(slack)),
               timeout=90, what=f"night {i}'s batch {batch} to end in the thread")
    return batch


@pytest.mark.timeout(600)
def test_a_simulated_history_alerts_the_step_the_release_and_the_gpu_and_nothing_else(
    site: Site, slack: SlackStandin, capsys: pytest.CaptureFixture[str],
) -> None:
    store = Store(site.database)
    added = here(capsys, site, "watch", "add", "nightly", "--at", "02:00")
    assert added.returncode == 0, added.stderr
    watch = store.list_watches()[0].id
    store.set_watch_thread(watch, CHANNEL, THREAD)  # as the bot does with its reply's ts
    worker, beat = Worker(site, "nightly"), Beat(site)
    batches: list[str] = []
    try:
        nights = history()
        for i, night in enumerate(nights):
            batches.append(run_night(site, slack, store, watch, i, night))
            if i == NOISE_NIGHTS - 1:
                # 20 noise-only nights: not one alert, nor one confirmed change
                assert not [c for c in store.watch_changes(watch) if c.state != "blip"]
                assert not alerts(slack)
            if i == STEP_NIGHT:
                step = wait_until(lambda: [c for c in store.watch_changes(watch)
                                           if c.batch == batches[STEP_NIGHT]
                                           and c.state == "confirmed"], timeout=30,
                                  what="the step's changes")
                dismissed = here(capsys, site, "watch", "dismiss", str(step[0].id))
                assert dismissed.returncode == 0, dismissed.stderr
        wait_until(lambda: not store.unposted_changes(), timeout=30,
                   what="every change told in the thread")
    finally:
        beat.stop()
        worker.stop()
    changes = store.watch_changes(watch)
    by_night = {(batches.index(c.batch), c.key.approach): c for c in changes}
    texts = thread_texts(slack)

    # the step: alerted on its first night, once its confirmation agreed; the release named
    step = by_night[(STEP_NIGHT, "baseline")]
    assert step.state == "dismissed" and step.since == batches[STEP_NIGHT]
    assert step.confirmation is not None and step.confirmation not in batches
    assert -12.0 < step.delta_pct < -8.0
    assert {"key": "sglang", "before": "0.5.2", "after": "0.5.3"} in step.data["stack_diff"]
    assert not step.environment
    posted = alerts(slack)
    step_alert = next(a for a in posted if f"change {step.id}:" in a["text"])
    assert "sglang 0.5.2 → 0.5.3" in step_alert["text"] and "regression" in step_alert["text"]
    assert f"<@{_owner(store, watch)}>" in json.dumps(step_alert["blocks"])
    buttons = [e["action_id"] for b in _blocks(step_alert) if b["type"] == "actions"
               for e in b["elements"]]
    assert buttons == ["specbench_watch_ack", "specbench_watch_dismiss"]

    # the dip: a candidate its confirmation did not confirm, said so, nobody paged
    dip = by_night[(DIP_NIGHT, "baseline")]
    assert dip.state == "blip" and dip.data["nights"] == 1
    assert any(f"Watch {watch}: output_throughput of baseline: not confirmed: a one-night "
               f"blip (" in t for t in texts)
    assert not [a for a in posted if f"change {dip.id}:" in a["text"]]

    # the GPU: an environment change, labelled as such
    gpu = by_night[(GPU_NIGHT, "baseline")]
    assert gpu.state == "confirmed" and gpu.environment
    assert {"key": "gpu", "before": "NVIDIA H200", "after": "NVIDIA H100 80GB HBM3"} in \
        gpu.data["stack_diff"]
    gpu_alert = next(a for a in posted if f"change {gpu.id}:" in a["text"])
    assert "environment change (not a regression)" in gpu_alert["text"]

    # nothing else: the dismissed step never again, each alert posted once, one per series
    confirmed = [(n, c.key.approach) for (n, _), c in by_night.items()
                 if c.state in ("confirmed", "acknowledged", "dismissed")]
    assert sorted(confirmed) == [(STEP_NIGHT, "baseline"), (STEP_NIGHT, "chunked"),
                                 (GPU_NIGHT, "baseline"), (GPU_NIGHT, "chunked")]
    assert len(posted) == 4 and len({a["text"] for a in posted}) == 4
    # each night's batch started once, on its slot
    assert len(batches) == len(set(batches)) == GPU_NIGHT + 1
    plans = [store.get_batch(b) for b in batches]
    assert all(p is not None and p.state in TERMINAL_STATES and p.plan.watch == watch
               for p in plans)


def _owner(store: Store, watch: int) -> str:
    row = store.get_watch(watch)
    assert row is not None
    return row.owner
