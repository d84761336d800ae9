"""One command layer: the CLI, the console and Slack give the same answer to the same command.

Each command runs through all three surfaces over one store (Slack over real signed HTTP to
the Bolt app and the loopback Web API stand-in), and the answers are compared with each other
and with the data the command itself returns.
"""

from __future__ import annotations

import asyncio
import html
import io
import json
import re
import time
from typing import Any

import pytest

from bot.cli.main import main
from bot.console import Console
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import plan_batch
from jobs.commands.context import Caller, Context
from jobs.commands.show import show
from jobs.commands.status import status
from tests.bot.conftest import start_bot
from tests.standin.slack_api import SlackStandin


def _finished_batch(dispatcher: EmbeddedDispatcher) -> str:
    submitted = dispatcher.submit(plan_batch("demo"), requested_by="U_ALICE")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = dispatcher.store.get_batch(submitted.batch.id)
        if row is not None and row.report is not None and row.state == "done":
            return row.id
        time.sleep(0.05)
    raise AssertionError("the demo batch did not finish")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _console(dispatcher: EmbeddedDispatcher, line: str) -> str:
    out = io.StringIO()
    console = Console(dispatcher, out)
    reply = asyncio.run(console.say(line))
    assert reply.exit_code == 0, reply.text
    return out.getvalue()


def _slack(server: Any, standin: SlackStandin, line: str) -> str:
    before = len(standin.recorded())
    assert server.command(line).status_code == 200
    posts = ("chat.postEphemeral", "chat.postMessage")
    calls = standin.wait_for(lambda cs: any(c.method in posts for c in cs[before:]))
    text: str = next(c for c in calls[before:] if c.method in posts).body["text"]
    # Slack's rendering of the same text: multi-line answers in a code block, &<> escaped
    text = text.strip().removeprefix("```").removesuffix("```")
    return html.unescape(text)


def _same(*texts: str) -> str:
    # the digest's window ends now: surfaces asked a second apart may straddle a minute
    stripped = [re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<minute>", t.strip()) for t in texts]
    assert all(t == stripped[0] for t in stripped), stripped
    return stripped[0]


@pytest.mark.timeout(120)
def test_each_command_answers_alike_on_the_cli_the_console_and_slack(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = _finished_batch(dispatcher)
    ctx = Context(store=dispatcher.store, caller=Caller(user="U_ALICE"))
    server = start_bot(dispatcher, standin)
    try:
        answers: dict[str, str] = {}
        for line, argv in [("status", ["status"]), ("show", ["show"]),
                           (f"show {batch}", ["show", batch]), ("presets", ["presets"]),
                           ("digest", ["digest"])]:
            answers[line] = _same(_cli(capsys, *argv), _console(dispatcher, line),
                                  _slack(server, standin, line))
        for line in ("history", "help"):  # chat-only commands: the console and Slack
            answers[line] = _same(_console(dispatcher, line), _slack(server, standin, line))
    finally:
        server.stop()
    assert batch in answers["show"] and answers["show"] == answers[f"show {batch}"]
    assert "No batch is running or queued." in answers["status"]
    assert "demo" in answers["presets"] and batch in answers["history"]
    assert "retry BATCH" in answers["help"]
    # and the data behind them: the CLI's JSON is the command's own data
    assert json.loads(_cli(capsys, "status", "--format", "json")) == status(ctx)
    report = show(ctx, batch).report
    assert json.loads(_cli(capsys, "show", batch, "--format", "json")) == report
