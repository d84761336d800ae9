"""The Slack bot in distributed mode: real `specbench bot --http` and `specbench worker`
processes, a real Redis, the loopback Slack stand-in. Events reach the bot through the Redis
consumer group and are acknowledged only once handled, so a bot killed mid-batch leaves its
successor what it needs, and the summary is posted exactly once.

Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from jobs.store import Store
from tests.bot.conftest import BOT_TOKEN, PLANTED, SIGNING_SECRET, free_port, sign, summaries
from tests.bot.conftest import thread_of as thread_calls
from tests.builders import loopback_client, standin_preset
from tests.jobs.test_distributed import REPO, Site, Worker, make_site, redis_db, wait_until
from tests.standin.slack_api import SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = standin_preset(
    "standin-bot", description="a stand-in batch long enough to lose its bot halfway",
    queue="botq", env={"STANDIN_STARTUP_S": "0.2", "MY_API_KEY": "${MY_API_KEY}"},
    approaches=[
        {"name": "slow-start", "hypothesis": "the configuration during which the bot dies",
         "env": {"STANDIN_THROUGHPUT": "90", "STANDIN_STARTUP_S": "4"}},
        {"name": "after", "hypothesis": "runs while no bot is up",
         "env": {"STANDIN_THROUGHPUT": "70"}},
    ],
)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    gen = redis_db()
    made = make_site(tmp_path, next(gen), {"standin-bot": PRESET})
    made.env["MY_API_KEY"] = PLANTED  # the worker's secret, the preset's ${MY_API_KEY}
    yield made
    next(gen, None)


class Bot:
    """A `specbench bot --http PORT` process against the stand-in; `held`, it starts at start().
    Its imports cost it nothing: it forks from the worker's warm interpreter (tests/warm_cli.py).
    """

    def __init__(self, site: Site, standin: SlackStandin, *, held: bool = False) -> None:
        self.site = site
        self.port = free_port()
        self.log = site.root / f"bot-{time.monotonic_ns()}.log"
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self._env = site.worker_env()
        self._env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                         SLACK_API_URL=standin.url)
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = loopback_client(timeout=10)
        if not held:
            self.start()

    def start(self) -> Bot:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "bot", "--http", str(self.port)],
            stdin=subprocess.DEVNULL, env=self._env, cwd=REPO, stdout=self._out,
            stderr=subprocess.STDOUT)
        wait_until(self._healthy, timeout=30, what="the bot to answer /healthz", alive=self.proc)
        return self

    @property
    def consumer(self) -> str:
        import socket

        return f"{socket.gethostname()}:{self.proc.pid}"

    def _healthy(self) -> bool:
        try:
            return self.client.get(f"http://127.0.0.1:{self.port}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def command(self, text: str, *, channel: str = "C_LAB") -> httpx.Response:
        body = urlencode({
            "team_id": "T0001", "channel_id": channel, "user_id": "U_ALICE",
            "command": "/specbench", "text": text, "trigger_id": f"tr-{time.time_ns()}",
        })
        return self.client.post(f"http://127.0.0.1:{self.port}/slack/events",
                                content=body.encode(), headers=sign(body))

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close()

    def _close(self) -> None:
        self.client.close()
        self._out.close()


def health(site: Site, role: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobs.ops.health", role], env=site.worker_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=30)


def group_info(site: Site) -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(site.broker, decode_responses=True)
    try:
        [group] = [g for g in client.xinfo_groups("specbench:events")
                   if g["name"] == "specbench-bot"]
        consumers = {c["name"]: c["pending"]
                     for c in client.xinfo_consumers("specbench:events", "specbench-bot")}
        last = client.xrevrange("specbench:events", count=1)[0][0]
        return {"group": group, "consumers": consumers, "last": last}
    finally:
        client.close()


def counts(standin: SlackStandin) -> dict[str, int]:
    calls = standin.recorded()
    return {
        "parents": len([c for c in calls if c.method == "chat.postMessage"
                        and not c.body.get("thread_ts")]),
        "posts": len(standin.recorded("chat.postMessage")),
        "updates": len(standin.recorded("chat.update")),
        "summaries": len(summaries(calls)),
        "completes": len(standin.recorded("files.completeUploadExternal")),
        "uploads": len(standin.recorded("upload")),
    }


@pytest.mark.timeout(150)
def test_a_bot_killed_mid_batch_is_succeeded_by_one_that_posts_the_summary_once(
    site: Site,
) -> None:
    standin = SlackStandin().start()
    bots: list[Bot] = [Bot(site, standin, held=True)]  # started once the worker is
    worker = Worker(site, "botq")
    store = Store(site.database)
    try:
        first = bots[0].start()
        assert first.command("run standin-bot").status_code == 200
        # the parent, the progress message in its thread, and a first edit of either
        standin.wait_for(lambda cs: len([c for c in cs if c.method == "chat.postMessage"]) >= 2
                         and any(c.method == "chat.update" for c in cs), timeout=30)
        [row] = store.list_batches()
        assert row.state in ("queued", "running")
        first.kill9()
        before = counts(standin)
        assert before["summaries"] == 0 and before["parents"] == 1
        second = Bot(site, standin, held=True)  # not a bot until started
        bots.append(second)
        wait_until(lambda: (r := store.get_batch(row.id)) is not None and r.state == "done",
                   timeout=60, what="the batch to finish while no bot is up")

        second.start()
        third = Bot(site, standin, held=True)
        bots.append(third)
        standin.wait_for(
            lambda cs: bool(summaries(cs))
            and any(c.method == "files.completeUploadExternal" for c in cs)
            and any(c.method == "chat.update" and c.body["ts"] == thread_calls(cs)["parent_ts"]
                    and "baseline" in (c.body.get("text") or "") for c in cs),
            timeout=30)
        assert health(site, "bot").returncode == 0  # the bot's heartbeat file is fresh
        # Everything the group was given is handled by the new bot: nothing left pending at it,
        # and the events emitted while no bot was up were read (the group's cursor is at the end).
        info = wait_until(lambda: (i := group_info(site))["consumers"].get(second.consumer) == 0
                          and i["group"]["last-delivered-id"] == i["last"] and i,
                          timeout=60, what="the new bot to acknowledge every event")
        assert first.consumer in info["consumers"]
        second.stop()
        assert "bot starting" in second.output()
        settled = counts(standin)

        third.start()  # a second restart finds nothing left to post
        time.sleep(3)
        third.stop()
        assert counts(standin) == settled
    finally:
        for bot in bots:
            bot.stop()
        worker.stop()
        standin.stop()
    after = counts(standin)
    assert after["summaries"] == 1 and after["completes"] == 2 and after["uploads"] == 2
    assert after["parents"] == 1, "the successor must edit the first bot's thread, not open one"
    t = thread_calls(standin.recorded())
    (summary,) = summaries(standin.recorded())
    assert summary.body["thread_ts"] == t["parent_ts"]
    assert "done" in t["progress_updates"][-1].body["text"]  # the same progress message
    assert "baseline" in t["parent_updates"][-1].body["text"]  # the parent's final headline
    posts = store.slack_posts(row.id)
    assert posts is not None and posts.summary_posted_at is not None
    everything = b"".join(c.raw for c in standin.recorded(status=None))
    assert PLANTED.encode() not in everything and BOT_TOKEN.encode() not in everything
    assert json.dumps(summary.body).count(row.id) >= 1
