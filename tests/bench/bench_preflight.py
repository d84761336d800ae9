"""Bench of preflight (issue 11): its cost per batch, cold and cached, and the Slack submit latency.

The SGLang here is a fake installation built for the bench: a `sglang` package whose import takes
IMPORT_S seconds (a real 0.5.23's `import sglang` takes seconds: torch, triton, flashinfer), a
`launch_server --help` that prints the real 0.5.23 help text (tests/jobs/fixtures), and the
dist-info metadata the version probe reads. Preflight checks the shipped `eagle3` preset.

- cold: a fresh worker on a fresh host (no cache): the version probe and `--help` run.
- new worker process: the disk cache under the data dir answers; nothing is started.
- same worker, next batch: the in-memory cache answers.
- Slack submit: `/specbench run eagle3` to the bot's ack and to its first thread message, with a
  distributed bot (preflight is the worker's), for a fast and a slow `import sglang`; and, for
  comparison, what a bot that preflights on submit (embedded mode, cold) takes.
"""

from __future__ import annotations

import os
import queue
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jobs.batches.dispatch import EmbeddedDispatcher

REPO = Path(__file__).resolve().parents[2]
HELP = REPO / "tests" / "jobs" / "fixtures" / "sglang-0.5.23-help.txt"
IMPORT_S = 3.0

_INIT = """\
import os, time
time.sleep(float(os.environ.get("FAKE_SGLANG_IMPORT_S", "0")))
__version__ = "0.5.23"
"""
_LAUNCH = """\
import sys
if "--help" in sys.argv:
    sys.stdout.write(open({help!r}, encoding="utf-8").read())
    sys.exit(0)
sys.exit("this fake SGLang only answers --help")
"""


def fake_sglang(root: Path) -> Path:
    """An interpreter (a wrapper script) that has the fake SGLang 0.5.23 installed."""
    site = root / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(_INIT)
    (site / "sglang" / "launch_server.py").write_text(_LAUNCH.format(help=str(HELP)))
    info = site / "sglang-0.5.23.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    (info / "RECORD").write_text("sglang/__init__.py,,\n")
    python = root / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python


def _preflight_costs(root: Path) -> dict[str, float]:
    from jobs.core.plans import load_preset, resolve
    from jobs.engines.sglang import probe as sglang_probe
    from jobs.engines.sglang.engine import SGLangEngine

    plan = resolve(load_preset("eagle3"))
    engine = SGLangEngine()
    costs: dict[str, list[float]] = {"cold": [], "disk": [], "memory": []}
    for _ in range(3):
        shutil.rmtree(root / "data" / "cache", ignore_errors=True)
        sglang_probe.clear_memory()
        for kind in ("cold", "disk", "memory"):
            if kind == "disk":
                sglang_probe.clear_memory()  # a new worker process: only the disk cache is left
            began = time.perf_counter()
            refused = engine.preflight(plan)
            costs[kind].append(time.perf_counter() - began)
            assert refused == {}, refused  # 0.5.23 accepts every configuration of eagle3
    return {kind: statistics.median(values) for kind, values in costs.items()}


def _submit_latency(root: Path, *, distributed: bool, runs: int = 5) -> tuple[float, float]:
    """Median ms from `/specbench run eagle3` to the ack and to the first thread message."""
    import asyncio
    import threading

    import uvicorn

    from bot.slack.app import SpecbenchBot
    from bot.slack.http import asgi_app
    from jobs.engines.sglang import probe as sglang_probe
    from jobs.store import Store
    from tests.bot.conftest import BOT_TOKEN, SIGNING_SECRET, BotServer, free_port
    from tests.standin.slack_api import SlackStandin

    store = Store()
    store.migrate()
    if distributed:
        from jobs.broker.dispatcher import DistributedDispatcher

        dispatcher: object = DistributedDispatcher(store, os.environ["SPECBENCH_BROKER_URL"])
    else:
        dispatcher = _not_running(EmbeddedDispatcher(store))
    standin = SlackStandin().start()
    bot = SpecbenchBot(dispatcher, token=BOT_TOKEN,  # type: ignore[arg-type]
                       signing_secret=SIGNING_SECRET, api_url=standin.url, interval=2.0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi_app(bot), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    client = BotServer(bot, port, server, thread)
    acks, firsts = [], []
    try:
        client.command("help")  # Bolt's one-time auth.test, outside the figures
        standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
        for _ in range(runs):
            shutil.rmtree(root / "data" / "cache", ignore_errors=True)
            sglang_probe.clear_memory()  # every submit as cold as it can be
            before = len([c for c in standin.recorded() if c.method == "chat.postMessage"])
            began = time.monotonic()
            answer = client.command("run eagle3")
            acks.append((time.monotonic() - began) * 1000)
            assert answer.status_code == 200
            calls = standin.wait_for(
                lambda cs, b=before: len([c for c in cs if c.method == "chat.postMessage"]) > b,
                timeout=60)
            first = [c for c in calls if c.method == "chat.postMessage"][before]
            firsts.append((first.at - began) * 1000)
    finally:
        client.stop()
        standin.stop()
        for row in store.list_batches():  # nothing is left queued for a worker to pick up
            store.set_state(row.id, "cancelled")
        getattr(dispatcher, "close", lambda: None)()
    return statistics.median(acks), statistics.median(firsts)


def _not_running(dispatcher: EmbeddedDispatcher) -> EmbeddedDispatcher:
    """The embedded comparison times the submit, not the batch: its worker thread is stopped
    and what it is given stays queued."""
    dispatcher._inbox.put(None)
    dispatcher._thread.join(timeout=5)
    dispatcher._inbox = queue.Queue()
    return dispatcher


def run() -> dict[str, str]:
    from tests.jobs.test_distributed import redis_db

    saved = dict(os.environ)
    root = Path(tempfile.mkdtemp(prefix="bench-preflight-"))
    python = fake_sglang(root)
    os.environ.update(SPECBENCH_SGLANG_PYTHON=str(python), SPECBENCH_DATA_DIR=str(root / "data"),
                      FAKE_SGLANG_IMPORT_S=str(IMPORT_S))
    for name in ("SPECBENCH_BROKER_URL", "SPECBENCH_DATABASE_URL", "SPECBENCH_CONFIG_DIR",
                 "SPECBENCH_ALLOWED_USERS", "SPECBENCH_ALLOWED_CHANNELS"):
        os.environ.pop(name, None)
    out: dict[str, str] = {}
    try:
        costs = _preflight_costs(root)
        out.update({
            f"preflight.cold_s (eagle3, real 0.5.23 help, import {IMPORT_S:g} s; median of 3)":
                f"{costs['cold']:.2f}",
            "preflight.new_worker_process_ms (disk cache)": f"{costs['disk'] * 1000:.1f}",
            "preflight.same_worker_next_batch_ms (memory cache)":
                f"{costs['memory'] * 1000:.2f}",
            "preflight.cold / cached (new worker process)":
                f"{costs['cold'] / max(costs['disk'], 1e-9):.0f}x",
        })
        gen = redis_db()
        try:
            os.environ["SPECBENCH_BROKER_URL"] = next(gen)
        except BaseException:  # pytest.skip: no Redis here
            gen = None
        if gen is not None:
            latency = {}
            for import_s in (0.0, IMPORT_S):
                os.environ["FAKE_SGLANG_IMPORT_S"] = str(import_s)
                os.environ["SPECBENCH_DATABASE_URL"] = f"sqlite:///{root}/d{import_s:g}.db"
                latency[import_s] = _submit_latency(root, distributed=True)
            next(gen, None)
            os.environ.pop("SPECBENCH_BROKER_URL")
            fast, slow = latency[0.0], latency[IMPORT_S]
            out.update({
                "slack.submit_ack_ms (distributed; import sglang 0 s / "
                f"{IMPORT_S:g} s; median of 5)": f"{fast[0]:.1f} / {slow[0]:.1f}",
                "slack.submit_to_first_thread_message_ms (same)":
                    f"{fast[1]:.0f} / {slow[1]:.0f} (ratio {slow[1] / fast[1]:.2f})",
            })
        os.environ["FAKE_SGLANG_IMPORT_S"] = str(IMPORT_S)
        os.environ["SPECBENCH_DATABASE_URL"] = f"sqlite:///{root}/embedded.db"
        embedded = _submit_latency(root, distributed=False, runs=3)
        out["slack.submit_to_first_thread_message_ms (a bot that preflights, cold; was every "
            "submit before)"] = f"{embedded[1]:.0f}"
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)
    return out


if __name__ == "__main__":
    for key, figure in run().items():
        print(f"{key}: {figure}")
