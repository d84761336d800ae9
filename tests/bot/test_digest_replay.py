"""A replayed digest posts once (issue 20, item 6): Slack's retry of a `/specbench digest`
reaching a restarted bot, and beat's `send_digest` run twice for one scheduled period.

Real processes: `specbench bot --http` killed with SIGKILL and started again, `send_digest` in
two Python processes, the Slack stand-in. Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from bot.slack.app import idempotency_key
from jobs.store import Store
from tests.bot.conftest import BOT_TOKEN, sign
from tests.bot.test_distributed_bot import Bot
from tests.jobs.test_distributed import REPO, Site, make_site, redis_db, wait_until
from tests.standin.slack_api import Call, SlackStandin

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    gen = redis_db()
    yield make_site(tmp_path, next(gen), {})
    next(gen, None)


def digests(standin: SlackStandin) -> list[Call]:
    return [c for c in standin.recorded("chat.postMessage")
            if "specbench digest" in json.dumps(c.body.get("blocks"))]


def send(bot: Bot, body: str, *, retry: int = 0) -> None:
    headers = sign(body)
    if retry:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
    response = bot.client.post(f"http://127.0.0.1:{bot.port}/slack/events",
                               content=body.encode(), headers=headers)
    assert response.status_code == 200


def digest_body(trigger: str) -> str:
    return urlencode({"team_id": "T0001", "channel_id": "C_LAB", "user_id": "U_ALICE",
                      "command": "/specbench", "text": "digest", "trigger_id": trigger})


@pytest.mark.timeout(120)
def test_a_digest_command_replayed_after_a_restart_posts_once(site: Site) -> None:
    standin = SlackStandin().start()
    store = Store(site.database)
    bots: list[Bot] = []
    try:
        first = Bot(site, standin)
        second = Bot(site, standin, held=True)  # started when the first is gone
        bots += [first, second]
        body = digest_body("tr-digest-1")
        send(first, body)
        standin.wait_for(lambda cs: bool(digests(standin)), timeout=30)
        key = idempotency_key("T0001", "U_ALICE", "/specbench", "digest", "tr-digest-1")
        # recorded done, not only begun: a bot killed between Slack's answer and its record
        # is the one case left open (docs/contracts.md), not what this test is about
        wait_until(lambda: (got := store.slack_parts(f"request:{key}").get("reply")) is not None
                   and got.is_done, timeout=60, what="the answer recorded")
        first.kill9()
        second.start()
        send(second, body, retry=1)  # Slack's retry of the same request, to the new bot
        send(second, body, retry=2)
        send(second, digest_body("tr-digest-2"))  # a new request is answered
        standin.wait_for(lambda cs: len(digests(standin)) >= 2, timeout=30)
        time.sleep(2)  # room for a wrong second post of the replayed one
        assert len(digests(standin)) == 2
    finally:
        for bot in bots:
            bot.stop()
        standin.stop()


@pytest.mark.timeout(120)
def test_beats_digest_delivered_twice_in_one_period_posts_once(site: Site) -> None:
    standin = SlackStandin().start()
    env = site.worker_env()
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_API_URL=standin.url,
               SPECBENCH_DIGEST_CHANNEL="C_DIGEST", SPECBENCH_DIGEST_SCHEDULE="0 9 * * 1")
    code = "from bot.slack.digest import send_digest; print(send_digest())"
    try:
        answers = [subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                                  capture_output=True, text=True, timeout=60)
                   for _ in range(2)]
        assert [a.stdout.strip().splitlines()[-1] for a in answers] == ["True", "False"], \
            [a.stderr[-2000:] for a in answers]
        (posted,) = digests(standin)
        assert posted.body["channel"] == "C_DIGEST"
    finally:
        standin.stop()
