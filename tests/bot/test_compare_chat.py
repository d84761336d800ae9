"""`compare` on every surface: the router (Slack's parser), the console and the CLI give the
command's data, rendered by the same views; bad input is one line and exit 2."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import timedelta

import pytest

from bot import views
from bot.chat.router import Caller, Router
from bot.cli.main import main
from bot.console import Console
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands.compare import compare
from jobs.commands.context import Context
from tests.jobs.test_compare import SEED, T0, UPGRADED, load

ALICE = Caller(user="U_ALICE", channel="C_LAB")
OLD, NEW = "b-seed-5254", "b-seed-6310"


@pytest.fixture
def stored(dispatcher: EmbeddedDispatcher) -> EmbeddedDispatcher:
    """The seed session and its driver upgrade, two days later, in the default store."""
    load(dispatcher.store, SEED, at=T0)
    load(dispatcher.store, UPGRADED, at=T0 + timedelta(days=2))
    return dispatcher


def _data(dispatcher: EmbeddedDispatcher) -> dict[str, object]:
    return compare(Context(store=dispatcher.store, caller=ALICE))


def test_chat_answers_with_the_commands_data_as_text_and_blocks(
    stored: EmbeddedDispatcher,
) -> None:
    router = Router(stored)
    expected = views.compared(_data(stored))
    for line in ("compare", "/specbench compare", f"compare {NEW}", f"compare {OLD} {NEW}"):
        reply = router.handle(line, caller=ALICE)
        assert reply.exit_code == 0 and reply.text == expected, line
        assert reply.blocks is not None and reply.blocks[0]["type"] == "header"
    assert "driver 575.57.08 → 580.65.06" in expected
    assert "compare [A] [B]" in router.handle("help", caller=ALICE).text


def test_the_console_prints_the_same_text(stored: EmbeddedDispatcher) -> None:
    out = io.StringIO()
    reply = asyncio.run(Console(stored, out).say("compare"))
    assert reply.exit_code == 0
    assert views.compared(_data(stored)).strip() in out.getvalue()


def test_the_cli_in_text_json_and_slack(
    stored: EmbeddedDispatcher, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data(stored)
    capsys.readouterr()
    assert main(["compare"]) == 0
    assert capsys.readouterr().out == views.compared(data)
    assert main(["compare", OLD, NEW, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(data))
    assert main(["compare", NEW, "--format", "slack"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["text"].startswith(f"compare eagle3: {OLD}")
    sections = "\n".join(b["text"]["text"] for b in payload["blocks"] if b["type"] == "section")
    assert "driver 575.57.08 → 580.65.06" in sections
    assert "▼ eagle3-custom-allreduce" in sections and "▲ cuda-graph-max-bs-128" in sections


def test_bad_input_is_one_line_and_exit_2(
    stored: EmbeddedDispatcher, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["compare", "b-nope", NEW]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specbench compare: error: unknown batch")
    assert main(["compare", OLD]) == 2
    assert "no finished batch of eagle3 before b-seed-5254" in capsys.readouterr().err
    router = Router(stored)
    for line in (f"compare {OLD} {NEW} b-3", "compare --format json", f"compare {OLD} {OLD}"):
        reply = router.handle(line, caller=ALICE)
        assert reply.exit_code == 2 and reply.blocks is None, line
