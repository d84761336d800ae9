"""A flood of long commands stalls no one (issue 20, item 3): a chat line over the cap is refused
before it is split, a preset name over 128 characters before any file is looked up, each with a
one-line answer, while `help` from someone else is answered meanwhile. Split, each line of the
flood cost 12 s, and the help sent behind them would wait past its 60 s; how soon it comes is a
figure, printed, never held.

Real processes: a `specbench bot --http PORT` (embedded mode) against the Slack stand-in, signed
requests as Slack sends them, and the `specbench` CLI for the name cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from bot.chat.router import MAX_LINE_CHARS
from jobs.core.plans import MAX_NAME_CHARS
from jobs.store import Store
from tests.bot.conftest import sign
from tests.bot.test_http_hardening import REPO, BotProcess
from tests.builders import loopback_client
from tests.standin.slack_api import Call, SlackStandin

FLOOD = 8
LONG_NAME = "a" * 900_000  # what the flood sent: 12 s of splitting each, before the cap


@pytest.fixture
def bot_process(tmp_path: Path, demo_config: Path, standin: SlackStandin) -> Iterator[BotProcess]:
    proc = BotProcess(root=tmp_path, config=demo_config, api_url=standin.url)
    yield proc
    proc.stop()


def command(port: int, text: str, *, user: str, client: httpx.Client) -> int:
    body = urlencode({
        "token": "legacy", "team_id": "T0001", "channel_id": "C_LAB", "user_id": user,
        "command": "/specbench", "text": text, "trigger_id": f"tr-{time.time_ns()}-{user}",
        "response_url": "http://127.0.0.1:9/unused",
    })
    answer = client.post(f"http://127.0.0.1:{port}/slack/events", content=body.encode(),
                         headers=sign(body))
    return answer.status_code


def answers_to(standin: SlackStandin, user: str) -> list[Call]:
    return [c for c in standin.recorded("chat.postEphemeral") if c.body.get("user") == user]


@pytest.mark.timeout(180)
def test_a_flood_of_long_commands_leaves_help_answered(
    bot_process: BotProcess, standin: SlackStandin
) -> None:
    with loopback_client(timeout=60) as client:
        assert command(bot_process.port, "help", user="U_WARM", client=client) == 200
        standin.wait_for(lambda _: answers_to(standin, "U_WARM"), timeout=60)
        logged = bot_process.log_bytes()
        with ThreadPoolExecutor(FLOOD) as pool:
            flood = [pool.submit(command, bot_process.port, f"run {LONG_NAME}",
                                 user=f"U_FLOOD{n}", client=client) for n in range(FLOOD)]
            # help goes out while the flood is being answered
            standin.wait_for(lambda _: any(answers_to(standin, f"U_FLOOD{n}")
                                           for n in range(FLOOD)), timeout=60)
            asked = time.monotonic()
            assert command(bot_process.port, "help", user="U_HELP", client=client) == 200
            help_answer = standin.wait_for(lambda _: answers_to(standin, "U_HELP"),
                                           timeout=60)  # 8 lines split: 96 s
            waited = next(c for c in help_answer if c.body.get("user") == "U_HELP").at - asked
            assert [f.result() for f in flood] == [200] * FLOOD
        standin.wait_for(lambda _: all(answers_to(standin, f"U_FLOOD{n}") for n in range(FLOOD)),
                         timeout=60)
    print(f"help answered {waited:.3f} s after it was sent, during {FLOOD} commands of "
          f"{len(LONG_NAME):,} characters")
    for n in range(FLOOD):
        (reply,) = answers_to(standin, f"U_FLOOD{n}")
        text = reply.body["text"].strip()
        assert "\n" not in text and len(text) < 200, text[:300]
        assert f"at most {MAX_LINE_CHARS:,}" in text
    log = bot_process.output()
    assert "Traceback" not in log
    assert bot_process.log_bytes() - logged < 16 * 1024, log[-2000:]


def test_a_300_character_preset_name_gets_one_line(
    bot_process: BotProcess, standin: SlackStandin
) -> None:
    with loopback_client(timeout=30) as client:
        assert command(bot_process.port, "run " + "b" * 300, user="U_LONG", client=client) == 200
    standin.wait_for(lambda _: answers_to(standin, "U_LONG"), timeout=60)
    (reply,) = answers_to(standin, "U_LONG")
    text = reply.body["text"].strip()
    assert "\n" not in text, text
    assert f"at most {MAX_NAME_CHARS} characters" in text and "300" in text
    assert "Traceback" not in bot_process.output() and "too long" not in bot_process.output()


@pytest.mark.parametrize("preset", ["c" * 300, "./" + "c" * 300 + ".yaml"])
def test_the_cli_refuses_a_name_too_long_for_a_file_with_exit_2(
    tmp_path: Path, demo_config: Path, preset: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"), SPECBENCH_CONFIG_DIR=str(demo_config),
               PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", preset],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "internal error" not in done.stderr
    database = tmp_path / "data" / "specbench.db"
    assert not database.exists() or Store(f"sqlite:///{database}").list_batches() == []
