"""The chat tests' harness: a fast fake engine, a demo preset, the Slack stand-in, a live bot.

The bot runs for real (uvicorn + Starlette + Bolt's AsyncApp) on 127.0.0.1 in a thread of its
own; tests talk to it with signed HTTP requests, as Slack does, and read what it sent to Slack
from the stand-in's record.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from bot.chat.router import Access
from bot.slack.app import SpecbenchBot
from bot.slack.http import asgi_app
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.engines.base import RunContext, now_iso, to_run_record
from jobs.engines.procs import free_port as free_port  # the tests' ports: the product's pick
from jobs.store import Store
from tests.builders import loopback_client
from tests.standin.slack_api import SlackStandin

SIGNING_SECRET = "test-signing-secret-0123"
BOT_TOKEN = "xoxb-planted-bot-token-4567"
PLANTED = "sk-planted-api-key-89ab"  # the worker's MY_API_KEY (demo: ${MY_API_KEY}), a log line
DEMO = """\
name: demo
description: A fake batch for the chat tests
engine: local
metric: output_throughput
min_effect_pct: 2.0
reps: 2
timeouts: {startup_s: 10, bench_s: 10}
bench: {num-prompts: 1}
overridable: [mem-fraction-static]
baseline:
  server_args: {model-path: /models/tiny, mem-fraction-static: 0.8}
  env: {FAKE_VALUE: "100", MY_API_KEY: "${MY_API_KEY}"}
approaches:
  - name: faster
    hypothesis: A faster kernel
    env: {FAKE_VALUE: "120"}
  - name: noisy
    hypothesis: Something that cannot be told from noise
    env: {FAKE_VALUE: "105", FAKE_SPREAD: "20"}
  - name: broken
    hypothesis: A flag that runs out of memory
    env: {FAKE_FAIL: "torch.OutOfMemoryError: CUDA out of memory (key PLANTED)"}
""".replace("PLANTED", PLANTED)


class FakeEngine:
    """An engine without processes: values, spread, failures and delays from the config's env
    (FAKE_VALUE, FAKE_SPREAD, FAKE_FAIL, FAKE_DELAY seconds per repetition). A test that sets
    `gate` holds every run at its start until the test sets it."""

    name = "local"
    delay = 0.02
    gate: threading.Event | None = None

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def fingerprint(self) -> dict[str, Any]:
        return {"gpu": "Fake GPU", "gpu_count": 1, "driver": "1", "cuda": "0", "torch": "0",
                "sglang": "0", "nccl": "0"}

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        started = now_iso()
        env = config.env
        delay = float(env.get("FAKE_DELAY", self.delay))
        if self.gate is not None:
            self.gate.wait(120)
        ctx.on_phase("launching", {})
        if env.get("FAKE_FAIL"):
            tail = (f"[launch] starting with token {os.environ.get('SLACK_BOT_TOKEN')}\n"
                    f"{env['FAKE_FAIL']}")
            return to_run_record(config, ctx, status="failed", started_at=started, exit_code=1,
                                 log_tail=tail)
        ctx.on_phase("ready", {})
        value, spread = float(env.get("FAKE_VALUE", 100)), float(env.get("FAKE_SPREAD", 0))
        samples = []
        for rep in range(ctx.plan.reps):
            if ctx.should_stop():
                return to_run_record(config, ctx, status="cancelled", started_at=started)
            ctx.on_phase("repetition", {"rep": rep + 1, "of": ctx.plan.reps})
            time.sleep(delay)
            samples.append(value + (spread if rep % 2 else -spread))
        ctx.on_phase("stopping", {})
        return to_run_record(config, ctx, status="ok", started_at=started, exit_code=0,
                             log_tail="ready", metrics={ctx.plan.metric: samples})


@pytest.fixture
def demo_config(config_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (config_copy / "presets" / "demo.yaml").write_text(DEMO)
    monkeypatch.setenv("MY_API_KEY", PLANTED)  # what the demo's ${MY_API_KEY} resolves to
    return config_copy


@pytest.fixture
def slack_env(monkeypatch: pytest.MonkeyPatch, demo_config: Path) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    for name in ("SPECBENCH_ALLOWED_USERS", "SPECBENCH_ALLOWED_CHANNELS", "SPECBENCH_ADMINS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def standin() -> Iterator[SlackStandin]:
    server = SlackStandin().start()
    yield server
    server.stop()


@pytest.fixture
def dispatcher(slack_env: None) -> Iterator[EmbeddedDispatcher]:
    d = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield d
    d.close()


@dataclass
class BotServer:
    bot: SpecbenchBot
    port: int
    server: Any
    thread: threading.Thread
    client: httpx.Client = field(default_factory=lambda: loopback_client(timeout=60))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    def command(self, text: str, *, user: str = "U_ALICE", channel: str = "C_LAB",
                trigger: str | None = None, **kwargs: Any) -> httpx.Response:
        body = urlencode({
            "token": "legacy", "team_id": "T0001", "channel_id": channel, "user_id": user,
            "command": "/specbench", "text": text, "trigger_id": trigger or f"tr-{time.time_ns()}",
            "response_url": "http://127.0.0.1:9/unused",
        })
        return self.post(body, **kwargs)

    def click(self, action_id: str, value: str, *, user: str = "U_ALICE",
              channel: str = "C_LAB", thread_ts: str = "1.0") -> httpx.Response:
        payload = {
            "type": "block_actions", "team": {"id": "T0001"}, "user": {"id": user},
            "channel": {"id": channel}, "trigger_id": f"tr-{time.time_ns()}",
            "message": {"ts": "2.0", "thread_ts": thread_ts},
            "actions": [{"action_id": action_id, "value": value, "type": "button",
                         "block_id": "b", "action_ts": str(time.time())}],
        }
        return self.post(urlencode({"payload": json.dumps(payload)}))

    def post(self, body: str, *, age_s: float = 0.0, secret: str = SIGNING_SECRET,
             headers: dict[str, str] | None = None) -> httpx.Response:
        return self.client.post(self.url, content=body.encode(),
                                headers={**sign(body, secret=secret, age_s=age_s),
                                         **(headers or {})})

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.client.close()


def sign(body: str, *, secret: str = SIGNING_SECRET, age_s: float = 0.0) -> dict[str, str]:
    """Slack's request signature: v0=HMAC-SHA256(secret, "v0:ts:body")."""
    ts = str(int(time.time() - age_s))
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/x-www-form-urlencoded"}


def start_bot(dispatcher: EmbeddedDispatcher, standin: SlackStandin, *, interval: float = 0.3,
              access: Access | None = None,
              engine_for: Callable[[str], Any] | None = None) -> BotServer:
    import uvicorn

    bot = SpecbenchBot(dispatcher, token=BOT_TOKEN, signing_secret=SIGNING_SECRET,
                       api_url=standin.url, access=access, interval=interval,
                       engine_for=engine_for or (lambda name: FakeEngine()))
    port = free_port()
    config = uvicorn.Config(asgi_app(bot), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a guard against a hang only
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the bot did not start")
        time.sleep(0.01)
    return BotServer(bot, port, server, thread)


@pytest.fixture
def bot(dispatcher: EmbeddedDispatcher, standin: SlackStandin) -> Iterator[BotServer]:
    server = start_bot(dispatcher, standin)
    yield server
    server.stop()


def summaries(calls: list[Any]) -> list[Any]:
    """The summary replies among recorded calls (they open with the report's header block)."""
    return [c for c in calls if c.method == "chat.postMessage" and c.status == 200
            and any(b.get("type") == "header" for b in c.body.get("blocks") or [])]


def thread_of(calls: list[Any]) -> dict[str, Any]:
    """The parent's and the progress message's ts, and the calls that touched each."""
    posts = [c for c in calls if c.method == "chat.postMessage" and c.status == 200]
    parent = next(c for c in posts if not c.body.get("thread_ts"))
    parent_ts = parent.answer["ts"]
    progress = next(c for c in posts if c.body.get("thread_ts") == parent_ts)
    updates = [c for c in calls if c.method == "chat.update" and c.status == 200]
    return {
        "parent": parent, "parent_ts": parent_ts, "progress_ts": progress.answer["ts"],
        "progress_updates": [c for c in updates if c.body["ts"] == progress.answer["ts"]],
        "parent_updates": [c for c in updates if c.body["ts"] == parent_ts],
        "replies": [c for c in posts if c.body.get("thread_ts") == parent_ts],
    }
