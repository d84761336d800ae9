"""The digest in Slack: the beat's post (message + trend chart) and `/specbench digest`, both
against the loopback stand-in, with a secret planted in the batch they sum up."""

from __future__ import annotations

import json
import time

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import plan_batch
from jobs.store import TERMINAL_STATES
from tests.bot.conftest import BOT_TOKEN, PLANTED, BotServer
from tests.standin.slack_api import Call, SlackStandin


def run_demo(dispatcher: EmbeddedDispatcher) -> str:
    batch = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE").batch.id
    deadline = time.monotonic() + 60
    while dispatcher.store.get_batch(batch).state not in TERMINAL_STATES:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the demo batch did not end"
        time.sleep(0.05)
    return batch


def check_chart_thread(calls: list[Call], *, channel: str) -> None:
    """The digest message in `channel`, the PNG uploaded into its thread, no secret anywhere."""
    posts = [c for c in calls if c.method == "chat.postMessage" and c.body["channel"] == channel]
    (digest,) = [c for c in posts if "specbench digest" in json.dumps(c.body.get("blocks"))]
    assert "trend chart" in json.dumps(digest.body["blocks"])
    (upload,) = [c for c in calls if c.method == "upload"]
    assert upload.raw.startswith(b"\x89PNG")
    (url,) = [c for c in calls if c.method == "files.getUploadURLExternal"]
    assert url.body["filename"].endswith(".png")
    (complete,) = [c for c in calls if c.method == "files.completeUploadExternal"]
    assert complete.body["channel_id"] == channel
    assert complete.body["thread_ts"] == digest.answer["ts"]
    everything = b"".join(c.raw for c in calls)
    assert PLANTED.encode() not in everything and BOT_TOKEN.encode() not in everything


def test_the_beat_posts_the_digest_with_its_trend_chart(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.slack.digest import publish_digest

    monkeypatch.setenv("SLACK_API_URL", standin.url)
    monkeypatch.setenv("SPECBENCH_DIGEST_CHANNEL", "C_DIGEST")
    run_demo(dispatcher)
    assert publish_digest(dispatcher.store) is True
    calls = standin.wait_for(lambda cs: any(c.method == "files.completeUploadExternal"
                                            for c in cs))
    check_chart_thread(calls, channel="C_DIGEST")
    text = next(c for c in calls if c.method == "chat.postMessage").body["text"]
    assert "demo on 1x Fake GPU: faster" in text  # the best configuration of the week


def test_without_a_channel_the_digest_is_not_posted(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.slack.digest import publish_digest

    monkeypatch.setenv("SLACK_API_URL", standin.url)
    monkeypatch.delenv("SPECBENCH_DIGEST_CHANNEL", raising=False)
    assert publish_digest(dispatcher.store) is False
    assert standin.recorded(status=None) == []


def test_the_digest_command_posts_the_chart_too(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher,
) -> None:
    run_demo(dispatcher)
    assert bot.command("digest").status_code == 200
    calls = standin.wait_for(lambda cs: any(c.method == "files.completeUploadExternal"
                                            for c in cs))
    check_chart_thread(calls, channel="C_LAB")
