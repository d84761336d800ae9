"""A value no process can be given is bad input (issue 20, item 6): a NUL character in a `--set`
env value from chat, or in a preset's env, is refused with one line (exit 2 on the command line)
and nothing is stored; it used to be stored and to fail on the worker.

Real processes: the bot (uvicorn + Bolt) behind signed requests, and the `specbench` CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import Store
from tests.bot.conftest import BotServer
from tests.bot.test_http_hardening import REPO
from tests.standin.slack_api import SlackStandin

ENVY = """\
name: envy
description: a preset whose env knob --set may change
engine: local
metric: output_throughput
min_effect_pct: 2.0
reps: 1
timeouts: {startup_s: 10, bench_s: 10}
bench: {num-prompts: 1}
overridable: [FAKE_VALUE]
baseline:
  server_args: {model-path: /models/tiny}
  env: {FAKE_VALUE: "100"}
approaches:
  - name: faster
    hypothesis: A faster kernel
    env: {FAKE_VALUE: "120"}
"""


@pytest.fixture
def envy(demo_config: Path) -> Path:
    (demo_config / "presets" / "envy.yaml").write_text(ENVY)
    return demo_config


def test_a_nul_in_a_chat_set_value_is_refused_and_nothing_stored(
    envy: Path, bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    bot.command("run envy --set FAKE_VALUE=1\x00rm")  # Slack sends it as %00
    calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    [answer] = [c.body["text"].strip() for c in calls if c.method == "chat.postEphemeral"]
    assert "NUL" in answer and "FAKE_VALUE" in answer and "\n" not in answer, answer
    assert "\x00" not in answer
    bot.command("run envy --set FAKE_VALUE=110")  # the same without it runs
    deadline = time.monotonic() + 60
    while not dispatcher.store.list_batches():
        assert time.monotonic() < deadline, "the clean run started nothing"
        time.sleep(0.05)
    [row] = dispatcher.store.list_batches()
    assert row.plan.overrides == {"FAKE_VALUE": 110}


@pytest.mark.parametrize("env", ['{FAKE_VALUE: "1\\0x"}', '{"A=B": "1"}'])
def test_a_preset_file_with_an_unpassable_env_is_exit_2(
    tmp_path: Path, envy: Path, env: str
) -> None:
    preset = tmp_path / "bad-env.yaml"
    preset.write_text(ENVY.replace("name: envy", "name: bad-env").replace(
        'env: {FAKE_VALUE: "120"}', f"env: {env}"))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    environ.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"), SPECBENCH_CONFIG_DIR=str(envy),
                   PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(preset)],
                          env=environ, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "approach 'faster'" in done.stderr
    database = tmp_path / "data" / "specbench.db"
    assert not database.exists() or Store(f"sqlite:///{database}").list_batches() == []
