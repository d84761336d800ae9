"""Each part of a thread's end is done exactly once, across bot restarts (issue 20, item 2).

Real processes: a `specbench worker`, `specbench bot --http` processes killed with SIGKILL and
started again, a real Redis, the Slack stand-in with its failure injection. A failed upload
(`files.completeUploadExternal` answering ok:false) is retried, and a bot restarted meanwhile
posts no second summary; a bot killed the moment its summary reached Slack (its answer held
back) is succeeded at once by one that finds the summary in the thread and does the rest. "At
once": the dead bot's claim is made to outlast the test, so only its death frees it.

Skipped without Redis unless SPECBENCH_REQUIRE_REDIS=1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from jobs.store import Store
from jobs.store.schema import Batch
from tests.bot.conftest import summaries
from tests.bot.conftest import thread_of as thread_calls
from tests.bot.test_distributed_bot import Bot
from tests.builders import standin_preset
from tests.jobs.test_distributed import Site, Worker, make_site, redis_db, wait_until
from tests.standin.slack_api import Call, SlackStandin, shipped_scopes

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PRESET = standin_preset(
    "standin-once", description="a short stand-in batch whose thread ends on a bad day",
    queue="onceq", env={"STANDIN_STARTUP_S": "0.2"},
    approaches=[{"name": "faster", "hypothesis": "a faster configuration",
                 "env": {"STANDIN_THROUGHPUT": "90", "STANDIN_STARTUP_S": "0.2"}}],
)
COMPLETE = "files.completeUploadExternal"


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    gen = redis_db()
    yield make_site(tmp_path, next(gen), {"standin-once": PRESET})
    next(gen, None)


def shared(calls: list[Call]) -> list[str]:
    """The names of the files shared into threads (completes Slack accepted)."""
    uploaded = {c.answer["file_id"]: c.body["filename"] for c in calls
                if c.method == "files.getUploadURLExternal"}
    return [uploaded[f["id"]] for c in calls if c.method == COMPLETE and c.answer.get("ok")
            for f in json.loads(c.body["files"])]


def is_finished(calls: list[Call]) -> bool:
    """The parent edited to its headline, and the chart and the run records shared."""
    posts = [c for c in calls if c.method == "chat.postMessage"]
    if not posts:
        return False
    parent_ts = posts[0].answer["ts"]
    names = shared(calls)
    return (any(n.endswith("-chart.png") for n in names)
            and any(n.endswith("-runs.jsonl") for n in names)
            and any(c.method == "chat.update" and c.body["ts"] == parent_ts
                    and "baseline" in (c.body.get("text") or "") for c in calls))


def check_once(standin: SlackStandin, store: Store, batch: str) -> None:
    calls = standin.recorded(status=None)
    assert len(summaries(calls)) == 1, "one summary"
    names = shared(calls)
    assert sorted(names) == sorted(set(names)) and len(names) == 2, names  # each file once
    t = thread_calls(calls)
    assert len([c for c in calls if c.method == "chat.postMessage"
                and not c.body.get("thread_ts")]) == 1
    assert "baseline" in t["parent_updates"][-1].body["text"]
    assert "done" in t["progress_updates"][-1].body["text"]
    posts = store.slack_posts(batch)
    assert posts is not None and posts.summary_posted_at is not None
    assert all(p.is_done for p in store.slack_parts(batch).values())


def outlasting(store: Store, batch: str) -> None:
    """The summary claim of the bot just killed, renewed for an hour in its name: a successor
    that finishes the thread took it because its holder died, not because it lapsed."""
    with store._read() as session:
        owner = session.execute(select(Batch.summary_claim_owner)
                                .where(Batch.id == batch)).scalar()
    assert owner is not None, "the killed bot held no claim"
    assert store.claim_summary(batch, ttl_s=3600, owner=owner)


def spare(site: Site, standin: SlackStandin, bots: list[Bot]) -> Bot:
    """A bot to start when one is due (kept with the others, to be stopped at the end)."""
    bot = Bot(site, standin, held=True)
    bots.append(bot)
    return bot


def settle(standin: SlackStandin, last: Bot) -> None:
    """Yet another restart finds nothing left to post."""
    before = len(standin.recorded(status=None))
    last.start()
    time.sleep(3)
    last.stop()
    after = standin.recorded(status=None)[before:]
    assert [c.method for c in after if c.method != "auth.test"] == []


@pytest.mark.timeout(180)
def test_a_failed_upload_is_retried_and_a_restart_posts_no_second_summary(site: Site) -> None:
    standin = SlackStandin().start()
    bots: list[Bot] = []
    first = spare(site, standin, bots)
    worker = Worker(site, "onceq")
    store = Store(site.database)
    try:
        standin.fail(COMPLETE, times=None)  # every upload fails until the bot is gone
        first.start()
        second = spare(site, standin, bots)
        assert first.command("run standin-once").status_code == 200
        failed = lambda cs: [c for c in cs if c.method == COMPLETE and not c.answer.get("ok")]  # noqa: E731
        standin.wait_for(lambda cs: len(failed(cs)) >= 2, timeout=90)  # retried, not given up
        [row] = store.list_batches()
        assert len(summaries(standin.recorded())) == 1
        first.kill9()
        outlasting(store, row.id)
        standin.fail(COMPLETE, times=1)  # and the successor's first try fails once more
        second.start()
        last = spare(site, standin, bots)
        standin.wait_for(is_finished, timeout=90)
        wait_until(lambda: (p := store.slack_posts(row.id)) is not None
                   and p.summary_posted_at is not None, timeout=60, what="the posted mark")
        assert len(failed(standin.recorded())) >= 3
        second.stop()
        settle(standin, last)
        check_once(standin, store, row.id)
    finally:
        for bot in bots:
            bot.stop()
        worker.stop()
        standin.stop()


def is_summary(method: str, body: dict[str, Any]) -> bool:
    return method == "chat.postMessage" and any(
        b.get("type") == "header" for b in body.get("blocks") or [])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("channel", ["C_LAB", "G_PRIVATE"])
def test_a_bot_killed_as_its_summary_is_sent_is_succeeded_at_once(
    site: Site, channel: str,
) -> None:
    """With the shipped manifest's scopes (issue 32): the successor reads the thread, in a
    public and in a private channel, and finds the summary instead of posting a second."""
    standin = SlackStandin(scopes=shipped_scopes()).start()
    bots: list[Bot] = []
    first = spare(site, standin, bots)
    worker = Worker(site, "onceq")
    store = Store(site.database)
    try:
        standin.hold(is_summary)  # Slack posts it; the bot never hears back
        first.start()
        second = spare(site, standin, bots)
        assert first.command("run standin-once", channel=channel).status_code == 200
        standin.wait_for(lambda cs: bool(summaries(cs)), timeout=90)
        [row] = store.list_batches()
        first.kill9()
        outlasting(store, row.id)
        standin.release()
        assert store.slack_parts(row.id)["summary"].state == "pending"
        second.start()
        last = spare(site, standin, bots)
        standin.wait_for(is_finished, timeout=90)
        wait_until(lambda: (p := store.slack_posts(row.id)) is not None
                   and p.summary_posted_at is not None, timeout=60, what="the posted mark")
        # found in the thread by its marker, not posted again
        looks = standin.recorded("conversations.replies")
        assert looks and all(c.answer.get("ok") for c in looks), [c.answer for c in looks]
        (summary,) = summaries(standin.recorded())
        assert store.slack_parts(row.id)["summary"].ref == summary.answer["ts"]
        second.stop()
        settle(standin, last)
        check_once(standin, store, row.id)
    finally:
        for bot in bots:
            bot.stop()
        worker.stop()
        standin.stop()
