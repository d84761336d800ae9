"""Chat names presets, the CLI may also give a path; no surface overrides `model-path`
(issue 10, item 1), through the router, the console, the Slack HTTP app and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.router import Access, Caller, Router
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.core.plans import NAMES_ONLY
from jobs.store import Store
from tests.bot.conftest import DEMO, FakeEngine, start_bot
from tests.conftest import REPO
from tests.standin.slack_api import SlackStandin

EVIL = DEMO.replace("name: demo", "name: evil")
ALICE = Caller(user="U_ALICE", channel="C_LAB")
CONSOLE = Caller(user="tester", surface="console")
LINES = ("run ../../x.yaml", "run /abs/evil.yaml", "run evil.yaml")


@pytest.fixture
def router(slack_env: None) -> Iterator[Router]:
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Router(dispatcher, Access(), engine_for=lambda name: FakeEngine())
    dispatcher.close()


def _lines(root: Path) -> list[str]:
    """The issue's three lines, with /abs under `root`; run from root/a/b."""
    return [line.replace("/abs", str(root / "abs")) for line in LINES]


def _plant(root: Path) -> None:
    for path in (root / "x.yaml", root / "abs" / "evil.yaml", root / "a" / "b" / "evil.yaml"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(EVIL)


@pytest.mark.parametrize("caller", [ALICE, CONSOLE], ids=["slack", "console"])
def test_a_path_from_chat_is_refused_alike_whether_or_not_the_file_exists(
    router: Router, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caller: Caller
) -> None:
    replies = {}
    for name, plant in (("there", True), ("absent", False)):
        root = tmp_path / name
        (root / "a" / "b").mkdir(parents=True)
        if plant:
            _plant(root)
        monkeypatch.chdir(root / "a" / "b")
        for line in _lines(root):
            reply = router.handle(line, caller=caller)
            assert reply.exit_code == 2 and reply.started is None and reply.ephemeral
            replies[(name, line.replace(str(root), ""))] = reply.text
    assert len(set(replies.values())) == 1, replies
    assert NAMES_ONLY in next(iter(replies.values()))
    assert router.dispatcher.store.list_batches() == []


def test_model_path_is_never_overridable_from_chat(router: Router) -> None:
    reply = router.handle("run demo --set model-path=/x", caller=ALICE)
    assert reply.exit_code == 2 and reply.started is None
    assert "'model-path' is never overridable" in reply.text
    assert router.handle("run eagle3 --set model-path=/x", caller=ALICE).exit_code == 2
    assert router.dispatcher.store.list_batches() == []


def test_a_name_still_runs_from_chat(router: Router) -> None:
    reply = router.handle("run demo --reps 1", caller=ALICE)
    assert reply.started is not None and reply.exit_code == 0


def test_the_slack_app_refuses_a_path_privately(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin, tmp_path: Path
) -> None:
    (tmp_path / "evil.yaml").write_text(EVIL)
    server = start_bot(dispatcher, standin)
    try:
        assert server.command(f"run {tmp_path / 'evil.yaml'}").status_code == 200
        calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    finally:
        server.stop()
    said = next(c for c in calls if c.method == "chat.postEphemeral")
    assert NAMES_ONLY in said.body["text"]
    assert not standin.recorded("chat.postMessage")
    assert dispatcher.store.list_batches() == []


def _specbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env},
                          capture_output=True, text=True, timeout=60)


def test_console_refuses_a_path_and_the_cli_takes_one(config_copy: Path, tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(EVIL)
    console = _specbench("console", "-c", f"run {path}", env={})
    assert console.returncode == 2, console.stderr
    assert NAMES_ONLY in console.stderr and "Traceback" not in console.stderr
    # The CLI loads the file by path (its knob check proves it read it); model-path: exit 2.
    for knob, needle in (("mem-fraction-statc=1", "unknown knob 'mem-fraction-statc'"),
                         ("model-path=/x", "'model-path' is never overridable")):
        cli = _specbench("run", str(path), "--set", knob, env={})
        assert cli.returncode == 2, cli.stderr
        lines = cli.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], cli.stderr
    eagle3 = _specbench("run", "eagle3", "--set", "model-path=/x", env={})
    assert eagle3.returncode == 2 and "never overridable" in eagle3.stderr
    assert not (Path(os.environ["SPECBENCH_DATA_DIR"]) / "specbench.db").exists() or (
        Store().list_batches() == [])
