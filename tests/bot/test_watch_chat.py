"""The regression watch from chat (docs/contracts.md "Regression watch"): every `watch`
subcommand through the real Bolt app and the Slack stand-in, and through the console; each bad
input and each user off the launch list refused in one line with nothing stored; an alert's
buttons act once (a second click is answered, not applied twice)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from bot.chat.router import Access
from bot.slack.client import SlackPoster, make_client
from bot.slack.watch_beat import news
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.core.watch import SeriesKey, SeriesPoint, point_stack
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import BOT_TOKEN, BotServer, FakeEngine, start_bot
from tests.bot.test_console import console, console_env
from tests.builders import specbench_here
from tests.conftest import REPO
from tests.standin.slack_api import SlackStandin


def answers(standin: SlackStandin, user: str = "U_ALICE") -> list[str]:
    """Every answer the bot gave `user`, in order: posted or whispered."""
    return [str(c.body.get("text")) for c in standin.recorded()
            if c.method in ("chat.postMessage", "chat.postEphemeral")
            and (c.body.get("user") in (user, None))]


def ask(bot: BotServer, standin: SlackStandin, line: str, *, user: str = "U_ALICE") -> str:
    """The bot's answer to one line."""
    before = len(standin.recorded())
    bot.command(line, user=user)
    calls = standin.wait_for(lambda cs: any(
        c.method in ("chat.postMessage", "chat.postEphemeral") for c in cs[before:]))
    text = str(next(c.body.get("text") for c in calls[before:]
                    if c.method in ("chat.postMessage", "chat.postEphemeral")))
    return text.removeprefix("```").removesuffix("```")  # an answer's text is preformatted


def wait_ended(store: Store, batch: str) -> None:
    deadline = time.monotonic() + 60
    while (row := store.get_batch(batch)) is None or row.state not in TERMINAL_STATES:
        assert time.monotonic() < deadline, f"batch {batch} did not end"
        time.sleep(0.05)


def seed_history(store: Store, watch: int, *, nights: int = 20) -> None:
    """The baseline's earlier nights at 120 (±1%), measured on this host and stack: the fake
    engine's 100 is then a 17% fall."""
    stack = point_stack(FakeEngine().fingerprint(), engine="local", host=socket.gethostname(),
                        model_revision=None)
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
    points = [SeriesPoint(key=SeriesKey("baseline", "output_throughput"), batch=f"b-old{i}",
                          at=start + dt.timedelta(days=i), value=120.0 * (1 + (-1) ** i * 0.01),
                          low=119.0, high=121.0, stack=stack) for i in range(nights)]
    store.put_points(watch, points)


def test_every_watch_subcommand_from_slack_and_the_alerts_buttons_act_once(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher,
) -> None:
    store = dispatcher.store
    added = ask(bot, standin, "watch demo --every daily --at 03:00")
    assert added.startswith("Watch 1 added: demo daily at 03:00 UTC on queue default")
    reply = next(c for c in standin.recorded("chat.postMessage") if added in c.body["text"])
    assert "thread_ts" not in reply.body  # in the channel: its thread becomes the watch's
    deadline = time.monotonic() + 60
    while (store.get_watch(1) or None) is None or store.get_watch(1).thread_ts is None:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the reply's ts was not kept as the watch's thread"
        time.sleep(0.02)
    row = store.get_watch(1)
    assert row is not None and (row.channel, row.thread_ts) == ("C_LAB", reply.answer["ts"])
    assert row.owner == "U_ALICE" and row.state == "active"

    assert "1  demo  daily at 03:00 UTC  queue default  active  by U_ALICE" in ask(
        bot, standin, "watch list")
    assert ask(bot, standin, "watch pause 1") == "watch 1 (demo) is paused"
    assert ask(bot, standin, "watch resume w1") == "watch 1 (demo) is active"
    assert ask(bot, standin, "watch show 1").startswith(
        "Watch 1: demo daily at 03:00 UTC on queue default, active, by U_ALICE\nNo point yet")

    seed_history(store, 1)
    started = ask(bot, standin, "watch run 1")  # its batch's thread opens, as a run's
    assert started.startswith("specbench demo · batch b-")
    night = started.split()[4]
    assert store.get_watch(1).last_batch == night  # type: ignore[union-attr]
    wait_ended(store, night)
    deadline = time.monotonic() + 60
    while not (store.slack_posts(night) or None) or \
            store.slack_posts(night).summary_posted_at is None:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the night's thread did not end"
        time.sleep(0.05)
    summary = next(c.body for c in standin.recorded("chat.postMessage")
                   if "Watch 1: output_throughput of baseline regression" in
                   json.dumps(c.body.get("blocks")))
    assert "(change " in json.dumps(summary["blocks"])  # the summary says what the night found
    found = store.get_batch(night)
    assert found is not None and found.report is not None and found.report["watch"] == 1
    [change] = [c for c in found.report["watch_changes"] if c["approach"] == "baseline"]
    assert change["state"] == "confirmed" and change["direction"] == "regression"
    assert change["stack_diff"] == [] and change["confirmation"] != night
    assert store.get_batch(change["confirmation"]).plan.confirms == night  # type: ignore[union-attr]

    # the beat tells the watch's thread: the night's end line, then the alert with its buttons
    asyncio.run(asyncio.to_thread(
        news, store, [], poster=SlackPoster(make_client(BOT_TOKEN, api_url=standin.url))))
    alert = next(c.body for c in standin.recorded("chat.postMessage")
                 if "specbench_watch_ack" in json.dumps(c.body.get("blocks")))
    assert alert["thread_ts"] == reply.answer["ts"]
    assert "same stack: the host or the workload changed" in alert["text"]
    assert "<@U_ALICE>" in json.dumps(alert["blocks"])

    before = len(standin.recorded())
    whispered = lambda cs: [c for c in cs[before:] if c.method == "chat.postEphemeral"]  # noqa: E731
    bot.click("specbench_watch_ack", str(change["id"]), user="U_BOB")
    standin.wait_for(lambda cs: len(whispered(cs)) >= 1)  # each click is handled on its own:
    bot.click("specbench_watch_dismiss", str(change["id"]), user="U_ALICE")  # the second, after
    calls = standin.wait_for(lambda cs: len(whispered(cs)) >= 2)
    told = [str(c.body["text"]) for c in whispered(calls)]
    assert told[0].startswith(f"change {change['id']} of watch 1 acknowledged by U_BOB")
    assert told[1].startswith(f"change {change['id']} of watch 1 was already acknowledged by "
                              "U_BOB at ")
    after = store.get_change(change["id"])
    assert after is not None and after[1].state == "acknowledged"
    assert after[1].data["by"] == "U_BOB"

    shown = ask(bot, standin, "watch show 1")
    assert f"{change['id']} acknowledged by U_BOB: output_throughput of baseline: regression" \
        in shown and "Precision (confirmed / dismissed / blips):" in shown
    before = len(standin.recorded())
    bot.command("watch show 1 --chart")  # the series chart, in the answer's thread
    calls = standin.wait_for(lambda cs: any(c.method == "files.completeUploadExternal"
                                            for c in cs[before:]), timeout=30)
    [upload] = [c for c in calls[before:] if c.method == "files.completeUploadExternal"]
    assert "watch 1's series" in json.dumps(upload.body)
    assert ask(bot, standin, "watch stop 1") == "watch 1 (demo) is stopped"
    assert "stopped; add it again" in ask(bot, standin, "watch run 1")


@pytest.mark.parametrize(("line", "says"), [
    ("watch nope", "unknown preset 'nope'"),
    ("watch demo --at 25:00", "--at '25:00': not a time of day"),
    ("watch demo --every 30m", "--every 30m: a watch runs at most hourly"),
    ("watch demo --every fortnightly", "--every 'fortnightly': not an interval"),
    ("watch demo --set nope=1", "unknown knob 'nope' in preset 'demo'"),
    ("watch demo --at", "--at needs a value"),
    ("watch show 99", "unknown watch '99'"),
    ("watch show x", "unknown watch 'x'"),
    ("watch pause", "usage: watch pause ID"),
    ("watch ack 7", "unknown change '7'"),
    ("watch", "usage: watch PRESET"),
])
def test_bad_watch_lines_are_refused_in_one_line_and_store_nothing(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher, line: str, says: str,
) -> None:
    answer = ask(bot, standin, line)
    assert says in answer and "Traceback" not in answer
    assert dispatcher.store.list_watches() == [] and dispatcher.store.list_batches() == []


def test_off_the_launch_list_a_watch_is_refused_and_reading_follows_show(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin,
) -> None:
    server = start_bot(dispatcher, standin, access=Access(
        users=frozenset({"U_ALICE"}), admins=frozenset({"U_ADMIN"})),
        engine_for=lambda name: FakeEngine())
    try:
        assert ask(server, standin, "watch demo").startswith("Watch 1 added")
        for user, line in (("U_MALLORY", "watch demo"), ("U_ADMIN", "watch demo"),
                           ("U_ADMIN", "watch stop 1"), ("U_ADMIN", "watch run 1"),
                           ("U_ADMIN", "watch pause 1"), ("U_ADMIN", "watch ack 1"),
                           ("U_MALLORY", "watch list")):
            answer = ask(server, standin, line, user=user)
            assert f"refused: user {user} is not on SPECBENCH_ALLOWED_USERS" in answer, line
        assert "1  demo  daily at 02:00 UTC" in ask(server, standin, "watch list",
                                                      user="U_ADMIN")
    finally:
        server.stop()
    [row] = dispatcher.store.list_watches()
    assert row.state == "active" and dispatcher.store.list_batches() == []


def test_at_most_max_watches_are_active(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECBENCH_MAX_WATCHES", "1")
    assert ask(bot, standin, "watch demo").startswith("Watch 1 added")
    assert "1 watches are active already, the most SPECBENCH_MAX_WATCHES allows" in ask(
        bot, standin, "watch demo --at 04:00")
    ask(bot, standin, "watch pause 1")
    assert ask(bot, standin, "watch demo --at 04:00").startswith("Watch 2 added")
    assert "SPECBENCH_MAX_WATCHES" in ask(bot, standin, "watch resume 1")
    assert [w.state for w in dispatcher.store.list_watches()] == ["paused", "active"]


def test_a_tick_starts_a_due_night_once_and_says_why_a_night_cannot_start(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher, demo_config: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduler's tick (`jobs.commands.watch_run.tick`, the beat's task body) with the bot's
    dispatcher: a due slot's batch started once however often it ticks; a preset gone since the
    watch was added is not run, and the watch's thread says why."""
    from jobs.commands.context import Caller, Context
    from jobs.commands.watch_run import tick

    clock = tmp_path / "clock"
    clock.write_text("2027-01-01T01:00:00+00:00")
    monkeypatch.setenv("SPECBENCH_WATCH_CLOCK_FILE", str(clock))
    assert ask(bot, standin, "watch demo --at 02:00").startswith("Watch 1 added")
    store = dispatcher.store
    ctx = Context(store=store, caller=Caller(user="beat", surface="beat"),
                  make_dispatcher=lambda: dispatcher, engine_for=lambda name: FakeEngine())
    night = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)
    assert tick(ctx, now=night - dt.timedelta(minutes=1)) == []
    [started] = tick(ctx, now=night)
    assert (started.outcome, started.slot, started.why) == ("started", night, None)
    assert tick(ctx, now=night + dt.timedelta(minutes=30)) == []  # once, however often
    wait_ended(store, str(started.batch))
    (demo_config / "presets" / "demo.yaml").unlink()
    [failed] = tick(ctx, now=night + dt.timedelta(days=1))
    assert failed.outcome == "failed" and "unknown preset 'demo'" in str(failed.why)
    assert [r.id for r in store.list_batches() if r.plan.confirms is None] == [started.batch]
    thread = store.get_watch(1).thread_ts  # type: ignore[union-attr]
    asyncio.run(asyncio.to_thread(news, store, [started, failed], poster=SlackPoster(
        make_client(BOT_TOKEN, api_url=standin.url))))
    lines = [str(c.body["text"]) for c in standin.recorded("chat.postMessage")
             if c.body.get("thread_ts") == thread]
    assert lines[0] == f"Night of 2027-01-01 02:00 UTC: batch {started.batch} started (watch 1, " \
        "demo)."
    assert lines[1].startswith("Night of 2027-01-02 02:00 UTC not started: unknown preset 'demo'")
    assert lines[2].startswith(f"Batch {started.batch} done: ")


def _console_here(tmp_path: Path, line: str, capsys: pytest.CaptureFixture[str]) -> Any:
    """`specbench console -c LINE` in this process (tests/builders.py `specbench_here`), with the
    environment tests/bot/test_console.py's console process gets."""
    return specbench_here(capsys, "console", "-c", line, "--timeout", "60",
                          env=console_env(tmp_path), drop=("STANDIN_", "SPECBENCH_"), cwd=REPO)


def seed_console_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console's store (tests/bot/test_console.py's data dir) with 15 earlier nights of the
    baseline at 100 on this host and stack: the stand-in's 82 is then an 18% fall."""
    from jobs.engines import get_engine
    from tests.standin.harness import make_standin

    make_standin(tmp_path / "probe", monkeypatch)
    stack = point_stack(get_engine("sglang").fingerprint(), engine="sglang",
                        host=socket.gethostname(), model_revision=None)
    store = Store(f"sqlite:///{tmp_path / 'data' / 'specbench.db'}")
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
    store.put_points(1, [SeriesPoint(key=SeriesKey("baseline", "output_throughput"),
                                     batch=f"b-old{i}", at=start + dt.timedelta(days=i),
                                     value=100.0 + (i % 3) - 1, low=98.0, high=102.0,
                                     stack=stack) for i in range(15)])
    store.close()


@pytest.mark.timeout(240)
def test_the_console_adds_pauses_runs_shows_acknowledges_and_stops_a_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Each line in this process but `watch run`, a batch that runs in a console of its own."""
    def here(line: str) -> Any:
        return _console_here(tmp_path, line, capsys)

    added = here("watch standin-demo --every weekly --at 05:30")
    assert added.returncode == 0, added.stderr
    assert "Watch 1 added: standin-demo weekly at 05:30 UTC" in added.stdout
    assert "watch 1 (standin-demo) is paused" in here("watch pause 1").stdout
    assert "watch 1 (standin-demo) is active" in here("watch resume 1").stdout
    seed_console_history(tmp_path, monkeypatch)
    ran = console(tmp_path, "watch run 1")
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stdout.splitlines() if "Watch 1: " in line]
    assert said and "output_throughput of baseline regression -18." in said[0], ran.stdout
    change = said[0].split("(change ")[1].split(")")[0]
    listed = here("/specbench watch list")
    assert "1  standin-demo  weekly at 05:30 UTC  queue default  active  by tester" in \
        listed.stdout
    shown = here("watch show 1")
    assert "output_throughput of baseline: 16 points, latest 82 in b-" in shown.stdout
    assert f"change {change} of watch 1 acknowledged by tester" in here(
        f"watch ack {change}").stdout
    again = here(f"watch dismiss c{change}")
    assert again.returncode == 0 and "was already acknowledged by tester at " in again.stdout
    for line, code, says in (("watch show 2", 2, "unknown watch '2'"),
                             ("watch standin-demo --every 10m", 2, "at most hourly"),
                             ("watch dismiss 99", 2, "unknown change '99'")):
        done = here(line)
        assert done.returncode == code and says in done.stdout + done.stderr, line
    assert "is stopped" in here("watch stop 1").stdout
