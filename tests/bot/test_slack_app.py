"""The real Bolt app over HTTP (signed requests) against the loopback Slack stand-in."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from bot.chat.router import Access
from bot.slack.app import SpecbenchBot
from bot.slack.client import make_client
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.ops import health
from jobs.store import TERMINAL_STATES
from tests.bot.conftest import (
    BOT_TOKEN,
    PLANTED,
    BotServer,
    FakeEngine,
    start_bot,
    summaries,
    thread_of,
)
from tests.standin.slack_api import SlackStandin


def wait_done(dispatcher: EmbeddedDispatcher, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = dispatcher.store.list_batches()
        if rows and all(r.state in TERMINAL_STATES for r in rows):
            return rows[-1].id
        time.sleep(0.05)
    raise AssertionError("the batch did not end")


def finished_thread(standin: SlackStandin) -> list[Any]:
    """Calls, once the summary, both uploads and the parent's final edit are in."""
    return standin.wait_for(
        lambda calls: bool(summaries(calls))
        and any(c.method == "files.completeUploadExternal" for c in calls)
        and any(c.method == "chat.update" and "baseline" in (c.body.get("text") or "")
                and c.body["ts"] == thread_of(calls)["parent_ts"] for c in calls),
        timeout=60,
    )


def test_a_run_builds_its_whole_thread_and_leaks_no_secret(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeEngine.delay = 0.15  # long enough for several coalesced progress states
    FakeEngine.gate = threading.Event()
    try:
        # answered while the batch's first run is held: the ack waits for no run
        response = bot.command("run demo")
        assert response.status_code == 200
        FakeEngine.gate.set()
        calls = finished_thread(standin)
    finally:
        FakeEngine.delay, FakeEngine.gate = 0.02, None
    t = thread_of(calls)
    assert "demo" in t["parent"].body["text"] and "U_ALICE" in json.dumps(t["parent"].body)
    assert t["parent"].body["channel"] == "C_LAB"
    # progress: edited in place, never more often than once per interval (0.3 s here; a round
    # starts `interval` after the last one's edits were answered, so however late each arrives)
    stamps = [c.at for c in t["progress_updates"]]
    assert len(stamps) >= 2
    assert all(b - a >= 0.25 for a, b in zip(stamps, stamps[1:], strict=False))
    assert "Cancel" in json.dumps(t["progress_updates"][0].body["blocks"])
    assert "done" in t["progress_updates"][-1].body["text"]
    # the summary: a thread reply with the report and its buttons
    (summary,) = summaries(calls)
    assert summary.body["thread_ts"] == t["parent_ts"]
    blocks = json.dumps(summary.body["blocks"])
    assert "faster" in blocks and "specbench_retry" in blocks and "specbench_logs" in blocks
    assert "demo 3/noisy" not in blocks and "b-" in blocks
    # the uploads: chart (PNG) and run records (JSONL), into the thread
    uploads = [c for c in calls if c.method == "upload"]
    assert len(uploads) == 2 and any(u.raw.startswith(b"\x89PNG") for u in uploads)
    jsonl = next(u.raw for u in uploads if not u.raw.startswith(b"\x89PNG"))
    assert [json.loads(line)["approach"] for line in jsonl.decode().splitlines()] == [
        "baseline", "faster", "noisy", "broken"]
    completes = [c for c in calls if c.method == "files.completeUploadExternal"]
    assert len(completes) == 2  # the chart and the run records, one part each
    assert all(c.body["thread_ts"] == t["parent_ts"] for c in completes)
    # the parent edited to the headline
    assert "1 improved" in t["parent_updates"][-1].body["text"]
    # who ran what, and where
    row = dispatcher.store.list_batches()[-1]
    assert (row.requested_by, row.channel, row.thread_ts) == ("U_ALICE", "C_LAB", t["parent_ts"])
    # the logs button answers privately, still without secrets
    bot.click("specbench_logs", row.id)
    calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    logs = next(c for c in calls if c.method == "chat.postEphemeral")
    assert "OutOfMemoryError" in logs.body["text"] and logs.body["user"] == "U_ALICE"
    for call in standin.recorded(status=None):
        assert PLANTED.encode() not in call.raw, call.method
        assert BOT_TOKEN.encode() not in call.raw, call.method
    assert b"***" in jsonl


def test_bad_signature_and_replayed_requests_get_401(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    assert bot.command("run demo", secret="not-the-secret").status_code == 401
    assert bot.command("run demo", age_s=6 * 60).status_code == 401
    time.sleep(0.3)
    assert dispatcher.store.list_batches() == []
    assert not standin.recorded("chat.postMessage") and not standin.recorded("chat.postEphemeral")


def test_a_user_outside_the_allow_list_starts_nothing(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    server = start_bot(dispatcher, standin, access=Access(users=frozenset({"U_ALICE"})))
    try:
        assert server.command("run demo", user="U_MALLORY").status_code == 200
        calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    finally:
        server.stop()
    refusal = next(c for c in calls if c.method == "chat.postEphemeral")
    assert refusal.body["user"] == "U_MALLORY" and "refused" in refusal.body["text"]
    assert dispatcher.store.list_batches() == []
    assert not standin.recorded("chat.postMessage")


def test_a_retried_delivery_starts_nothing(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    assert bot.command("run demo", trigger="tr-once").status_code == 200
    finished_thread(standin)
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert bot.command("run demo", trigger="tr-once", headers=retry).status_code == 200
    bot.bot._seen.clear()  # as if the bot had restarted: the store's key still holds
    assert bot.command("run demo", trigger="tr-once", headers=retry).status_code == 200
    time.sleep(0.5)
    assert len(dispatcher.store.list_batches()) == 1
    top = [c for c in standin.recorded("chat.postMessage") if not c.body.get("thread_ts")]
    assert len(top) == 1


def test_a_429_from_slack_is_waited_out(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    bot.command("help")  # Bolt's first request checks the token (auth.test): keep it out
    standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    standin.rate_limit(2)
    started = time.monotonic()
    bot.command("run demo")
    calls = finished_thread(standin)
    assert time.monotonic() - started >= 1.0
    limited = [c for c in calls if c.status == 429]
    assert len(limited) == 2 and limited[0].method == "chat.postMessage"
    assert len(summaries(calls)) == 1


def test_a_bot_restarted_mid_batch_posts_the_summary_once(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    """Embedded mode: the first bot goes down mid-batch; the worker goes on; a new bot catches
    up from the store (thread, progress message, summary not yet posted)."""
    FakeEngine.delay = 0.3
    first = start_bot(dispatcher, standin)
    try:
        first.command("run demo")
        standin.wait_for(lambda cs: len([c for c in cs if c.method == "chat.update"]) >= 1)
    finally:
        first.stop()
        FakeEngine.delay = 0.02
    assert dispatcher.store.list_batches()[-1].state == "running"
    assert not summaries(standin.recorded())
    wait_done(dispatcher)
    second = start_bot(dispatcher, standin)
    try:
        calls = finished_thread(standin)
    finally:
        second.stop()
    third = start_bot(dispatcher, standin)  # a second restart finds nothing left to post
    time.sleep(0.5)
    third.stop()
    calls = standin.recorded()
    t = thread_of(calls)
    assert len(summaries(calls)) == 1
    assert len([c for c in calls if c.method == "chat.postMessage"
                and not c.body.get("thread_ts")]) == 1
    assert "done" in t["progress_updates"][-1].body["text"]  # the same progress message
    assert len([c for c in calls if c.method == "files.completeUploadExternal"]) == 2  # a file each
    row = dispatcher.store.list_batches()[-1]
    posts = dispatcher.store.slack_posts(row.id)
    assert posts is not None and posts.summary_posted_at is not None


def test_a_bot_restarted_while_the_batch_runs_resumes_its_progress(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    FakeEngine.delay = 0.25
    try:
        first = start_bot(dispatcher, standin)
        first.command("run demo")
        standin.wait_for(lambda cs: any(c.method == "chat.update" for c in cs))
        first.stop()
        before = len(standin.recorded("chat.update"))
        second = start_bot(dispatcher, standin)
        calls = finished_thread(standin)
        second.stop()
    finally:
        FakeEngine.delay = 0.02
    t = thread_of(calls)
    assert len(summaries(calls)) == 1 and len(t["progress_updates"]) > before


def test_only_the_launcher_or_an_admin_may_cancel(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    FakeEngine.delay = 0.3
    server = start_bot(dispatcher, standin, access=Access(admins=frozenset({"U_ADMIN"})))
    try:
        server.command("run demo")
        standin.wait_for(lambda cs: any(c.method == "chat.update" for c in cs))
        batch = dispatcher.store.list_batches()[-1].id
        server.click("specbench_cancel", batch, user="U_BOB")
        standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
        assert not dispatcher.store.is_cancel_requested(batch)
        server.click("specbench_cancel", batch, user="U_ADMIN")
        calls = finished_thread(standin)
    finally:
        server.stop()
        FakeEngine.delay = 0.02
    assert dispatcher.store.get_batch(batch).state == "cancelled"  # type: ignore[union-attr]
    refusal = next(c for c in calls if c.method == "chat.postEphemeral")
    assert refusal.body["user"] == "U_BOB" and "refused" in refusal.body["text"]


def test_healthz_answers_and_the_heartbeat_is_kept(bot: BotServer) -> None:
    from jobs.ops import health

    assert bot.client.get(f"http://127.0.0.1:{bot.port}/healthz").text == "ok"
    assert health.main(["bot", "--quiet"]) == 0
    bot.stop()
    assert health.heartbeat_age("bot") is None  # a bot that stopped is not healthy


def test_auth_test_is_made_at_start_not_on_the_first_command(
    bot: BotServer, standin: SlackStandin
) -> None:
    assert len(standin.recorded("auth.test")) == 1
    bot.command("help")
    standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    assert len(standin.recorded("auth.test")) == 1


def test_clients_honour_slack_api_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/api")
    assert make_client("x").base_url == "http://127.0.0.1:1/api/"


def test_socket_mode_starts_against_the_stand_in(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    bot = SpecbenchBot(dispatcher, token=BOT_TOKEN, signing_secret=None, api_url=standin.url,
                       engine_for=lambda name: FakeEngine())
    loop = asyncio.new_event_loop()
    task = loop.create_task(bot.serve_socket_mode("xapp-planted-app-token"))
    runner = threading.Thread(target=lambda: loop.run_until_complete(asyncio.wait([task])))
    runner.start()
    try:
        deadline = time.monotonic() + 60  # a guard against a hang only
        while standin.socket_count() == 0:
            assert time.monotonic() < deadline, "Socket Mode did not connect"
            time.sleep(0.02)
        standin.send_envelope({
            "envelope_id": "env-1", "type": "slash_commands", "accepts_response_payload": True,
            "payload": {"team_id": "T0001", "channel_id": "C_LAB", "user_id": "U_ALICE",
                        "command": "/specbench", "text": "help", "trigger_id": "tr-sock"},
        })
        calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
        assert any(a.get("envelope_id") == "env-1" for a in standin.acks)
        deadline = time.monotonic() + 60  # the heartbeat follows the connection (hang guard)
        while health.heartbeat_age("bot") is None:
            assert time.monotonic() < deadline, "no bot heartbeat while connected"
            time.sleep(0.05)
    finally:
        loop.call_soon_threadsafe(task.cancel)
        runner.join(10)
        loop.close()
    assert health.heartbeat_age("bot") is None
    opened = [c for c in calls if c.method == "apps.connections.open"]
    assert opened and "Usage" in next(
        c for c in calls if c.method == "chat.postEphemeral").body["text"]
