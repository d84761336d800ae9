"""The allow-lists bind every chat command but `help`, and `--reps` has an upper bound
(issue 10, item 8): through the router, the console's surface, the Slack HTTP app and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from bot import views
from bot.chat.router import Access, Caller, Router
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands import CHAT_COMMANDS, help
from jobs.commands.run import MAX_REPS, check_reps
from jobs.errors import UserError
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import FakeEngine, start_bot
from tests.conftest import REPO
from tests.standin.slack_api import SlackStandin

ALICE = Caller(user="U_ALICE", channel="C_LAB")
MALLORY = Caller(user="U_MALLORY", channel="C_LAB")
ADMIN = Caller(user="U_ADMIN", channel="C_LAB")
ACCESS = Access(users=frozenset({"U_ALICE"}), channels=frozenset({"C_LAB"}),
                admins=frozenset({"U_ADMIN"}))


@pytest.fixture
def router(slack_env: None) -> Iterator[Router]:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Router(dispatcher, ACCESS, engine_for=lambda name: FakeEngine())
    dispatcher.close()


def _batch(router: Router) -> str:
    reply = router.handle("run demo --reps 1", caller=ALICE)
    assert reply.started is not None, reply.text
    batch_id = reply.started.batch.id
    deadline = time.monotonic() + 60
    while router.dispatcher.store.get_batch(batch_id).state not in TERMINAL_STATES:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return batch_id


def _every_line(batch_id: str) -> list[str]:
    lines = ["run demo", f"retry {batch_id} faster", "status", f"cancel {batch_id}", "show",
             f"show {batch_id}", "presets", "history", "digest", "compare",
             "probe --sizes 4K --iters 1", "bisect demo faster --from a --to b", "watch list"]
    assert {line.split()[0] for line in lines} == set(CHAT_COMMANDS) - {"help"}
    return lines


def test_a_user_off_the_list_gets_one_refusal_for_everything_but_help(router: Router) -> None:
    batch_id = _batch(router)
    texts = set()
    for line in _every_line(batch_id):
        reply = router.handle(line, caller=MALLORY)
        assert reply.exit_code == 2 and reply.ephemeral and reply.started is None, line
        assert not reply.uploads and reply.blocks is None, line
        texts.add(reply.text)
    assert texts == {views.error("refused: user U_MALLORY is not on SPECBENCH_ALLOWED_USERS")}
    assert "Usage: /specbench COMMAND" in router.handle("help", caller=MALLORY).text
    assert [r.id for r in router.dispatcher.store.list_batches()] == [batch_id]


def test_no_one_is_answered_in_a_channel_off_the_list(router: Router) -> None:
    batch_id = _batch(router)
    elsewhere = Caller(user="U_ALICE", channel="C_ELSEWHERE")
    for line in _every_line(batch_id):
        reply = router.handle(line, caller=elsewhere)
        assert reply.exit_code == 2 and reply.started is None, line
        assert "does not answer in this channel" in reply.text, line
        assert batch_id not in reply.text, line
    assert router.handle("help", caller=elsewhere).exit_code == 0
    # In the allowed channel the same user reads the report.
    shown = router.handle(f"show {batch_id}", caller=ALICE)
    assert shown.exit_code == 0 and batch_id in shown.text


def test_an_admin_reads_and_cancels_but_does_not_launch(router: Router) -> None:
    batch_id = _batch(router)
    assert router.handle(f"show {batch_id}", caller=ADMIN).exit_code == 0
    assert "already ended" in router.handle(f"cancel {batch_id}", caller=ADMIN).text
    assert "refused" in router.handle("run demo", caller=ADMIN).text
    assert "refused" in router.handle("probe", caller=ADMIN).text  # it holds the GPU host too


def test_the_console_is_the_operators(router: Router) -> None:
    batch_id = _batch(router)
    console = Caller(user="tester", surface="console")
    assert router.handle(f"show {batch_id}", caller=console).exit_code == 0
    assert router.handle("history", caller=console).exit_code == 0


def test_the_slack_app_refuses_show_and_digest_privately(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    server = start_bot(dispatcher, standin, access=ACCESS)
    try:
        for text in ("show", "digest", "history"):
            assert server.command(text, user="U_MALLORY").status_code == 200
        assert server.command("digest", user="U_ALICE", channel="C_ELSEWHERE").status_code == 200
        calls = standin.wait_for(
            lambda cs: sum(c.method == "chat.postEphemeral" for c in cs) >= 4)
    finally:
        server.stop()
    said = [c for c in calls if c.method == "chat.postEphemeral"]
    assert all("refused" in c.body["text"] for c in said)
    assert {c.body["user"] for c in said} == {"U_MALLORY", "U_ALICE"}
    assert not standin.recorded("chat.postMessage") and not standin.recorded("upload")


# --------------------------------------------------------------------------- --reps


def test_reps_have_an_upper_bound() -> None:
    check_reps(MAX_REPS)
    with pytest.raises(UserError, match=f"--reps must be at most {MAX_REPS}, got {MAX_REPS + 1}"):
        check_reps(MAX_REPS + 1)
    assert f"--reps N is 1 to {MAX_REPS};" in views.help_(help.help_())


def test_too_many_reps_from_chat_and_the_cli_store_nothing(router: Router) -> None:
    for line in (f"run demo --reps {MAX_REPS + 1}", "run demo --reps 100000"):
        reply = router.handle(line, caller=ALICE)
        assert reply.exit_code == 2 and f"at most {MAX_REPS}" in reply.text
    assert router.dispatcher.store.list_batches() == []
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "eagle3", "--reps", "21"],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"--reps must be at most {MAX_REPS}" in done.stderr
