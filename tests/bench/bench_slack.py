"""Bench of the Slack bot (issue 5): ack latency, command → first thread message, API calls.

`run()` returns name → figure. The bot is the real one (uvicorn + Starlette + Bolt's AsyncApp)
on 127.0.0.1 against the loopback Slack stand-in, with the chat tests' fake engine.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EIGHT = """\
name: eight
description: Eight approaches for the bench
engine: local
metric: output_throughput
min_effect_pct: 2.0
reps: 2
timeouts: {startup_s: 10, bench_s: 10}
bench: {num-prompts: 1}
baseline:
  server_args: {model-path: /models/tiny}
  env: {FAKE_VALUE: "100", FAKE_DELAY: "0.25"}
approaches:
""" + "".join(
    f"  - name: a{i}\n    hypothesis: variant {i}\n    env: {{FAKE_VALUE: \"{100 + 3 * i}\"}}\n"
    for i in range(1, 9)
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)]


# The load generator: raw HTTP/1.1 over keep-alive connections opened before the clock starts,
# requests signed and encoded up front. (httpx's per-request cost, paid 30 times in a row on the
# same few cores, made a bare Starlette app that answers at once look like p50 48 / p99 110 ms.)
_LOAD = r"""
import asyncio, hashlib, hmac, json, sys, time
from urllib.parse import urlencode, urlsplit

url, secret, n, at_once = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
parts = urlsplit(url)

def request(i):
    body = urlencode({"team_id": "T0001", "channel_id": "C_LAB", "user_id": "U_ALICE",
                      "command": "/specbench", "text": "status",
                      "trigger_id": f"tr-bench-{i}-{time.time_ns()}"})
    ts = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"X-Slack-Request-Timestamp: {ts}\r\nX-Slack-Signature: v0={mac}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return (head + body).encode()

async def exchange(reader, writer, data):
    writer.write(data)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    assert b" 200 " in status, status

async def main():
    conns = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(at_once)]
    out = []

    async def one(conn, data):
        started = time.perf_counter()
        await exchange(*conn, data)
        out.append((time.perf_counter() - started) * 1000)

    for wave in range(0, n, at_once):
        requests = [request(i) for i in range(wave, min(wave + at_once, n))]
        await asyncio.gather(*(one(c, r) for c, r in zip(conns, requests)))
        await asyncio.sleep(0.5)
    for _, writer in conns:
        writer.close()
    print(json.dumps(out))

asyncio.run(main())
"""

# The floor: a bare Starlette app on uvicorn that answers 200 at once, measured the same way.
_FLOOR = r"""
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

async def events(request):
    await request.body()
    return Response("")

app = Starlette(routes=[Route("/slack/events", events, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def _floor(n: int, at_once: int) -> list[float]:
    import socket
    import subprocess
    import sys

    from tests.bot.conftest import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", _FLOOR, str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the floor server did not start") from None
                time.sleep(0.05)
        return _acks(f"http://127.0.0.1:{port}/slack/events", n, at_once)
    finally:
        server.terminate()
        server.wait(10)


def _acks(url: str, n: int, at_once: int) -> list[float]:
    """Latencies (ms) from a separate process, as Slack's are: the client shares no GIL.
    Each request is timed from its write to the end of its response."""
    import json
    import subprocess
    import sys

    from tests.bot.conftest import SIGNING_SECRET

    done = subprocess.run([sys.executable, "-c", _LOAD, url, SIGNING_SECRET, str(n),
                           str(at_once)], capture_output=True, text=True, timeout=120,
                          check=True)
    return [float(v) for v in json.loads(done.stdout)]


def run() -> dict[str, str]:
    from jobs.batches.dispatch import EmbeddedDispatcher
    from jobs.store import Store
    from tests.bot.conftest import BOT_TOKEN, DEMO, SIGNING_SECRET, FakeEngine, start_bot
    from tests.standin.slack_api import SlackStandin

    saved = dict(os.environ)
    work = Path(tempfile.mkdtemp(prefix="bench-slack-"))
    shutil.copytree(REPO / "config", work / "config")
    (work / "config" / "presets" / "demo.yaml").write_text(DEMO)
    (work / "config" / "presets" / "eight.yaml").write_text(EIGHT)
    os.environ.update(SPECBENCH_CONFIG_DIR=str(work / "config"), SPECBENCH_DATA_DIR=str(work),
                      SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_BOT_TOKEN=BOT_TOKEN)
    for name in ("SPECBENCH_BROKER_URL", "SPECBENCH_DATABASE_URL", "SPECBENCH_ALLOWED_USERS",
                 "SPECBENCH_ALLOWED_CHANNELS"):
        os.environ.pop(name, None)
    standin = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    bot = start_bot(dispatcher, standin, interval=2.0)
    try:
        bot.command("help")  # Bolt's one-time auth.test, outside the figures
        standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
        acks = _acks(bot.url, 60, 30)
        floor = _floor(60, 30)

        firsts = []
        for _ in range(3):
            before = len(standin.recorded("chat.postMessage"))
            started = time.monotonic()
            bot.command("run demo")
            calls = standin.wait_for(
                lambda cs, b=before: len([c for c in cs if c.method == "chat.postMessage"]) > b)
            first = [c for c in calls if c.method == "chat.postMessage"][before]
            firsts.append((first.at - started) * 1000)
            _wait_idle(dispatcher)
        _wait_posted(dispatcher)

        mark = len(standin.recorded(status=None))
        count = len(dispatcher.store.list_batches())
        bot.command("run eight")
        deadline = time.monotonic() + 10
        while len(dispatcher.store.list_batches()) == count and time.monotonic() < deadline:
            time.sleep(0.02)
        _wait_idle(dispatcher)
        _wait_posted(dispatcher)
        calls = standin.recorded(status=None)[mark:]
        by_method: dict[str, int] = {}
        for c in calls:
            by_method[c.method] = by_method.get(c.method, 0) + 1
    finally:
        bot.stop()
        dispatcher.close()
        standin.stop()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(work, ignore_errors=True)
    detail = ", ".join(f"{k} {v}" for k, v in sorted(by_method.items()))
    return {
        "slack.ack_p50_ms (60 commands, 30 at once)": f"{statistics.median(acks):.1f}",
        "slack.ack_p99_ms (60 commands, 30 at once; target < 100)": f"{_pct(acks, 0.99):.1f}",
        "slack.ack_floor_p50/p99_ms (a bare uvicorn+Starlette app, same load)":
            f"{statistics.median(floor):.1f} / {_pct(floor, 0.99):.1f}",
        "slack.command_to_first_thread_message_ms (median of 3; target < 1000)":
            f"{statistics.median(firsts):.0f}",
        "slack.api_calls_per_batch_of_8_approaches": f"{len(calls)} ({detail})",
    }


def _wait_posted(dispatcher: object, timeout: float = 30.0) -> None:
    """Until every batch's thread has posted its summary."""
    store = dispatcher.store  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        posts = [store.slack_posts(r.id) for r in store.list_batches()]
        if all(p is not None and p.summary_posted_at is not None for p in posts):
            return
        time.sleep(0.05)
    raise RuntimeError("summaries were not posted")


def _wait_idle(dispatcher: object, timeout: float = 60.0) -> None:
    from jobs.store import TERMINAL_STATES

    store = dispatcher.store  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(r.state in TERMINAL_STATES for r in store.list_batches()):
            return
        time.sleep(0.05)
    raise RuntimeError("batches did not end")


if __name__ == "__main__":
    for name, figure in run().items():
        print(f"{name}: {figure}")
