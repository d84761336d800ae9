"""Secrets stay references (issue 19, item 4; docs/contracts.md "Every batch ends").

A preset's env value `${NAME}` reaches the server as the worker's NAME, read when the server
starts; the store, the plan, the events, the logs, the CLI's output and Slack keep `${NAME}`.
Real processes: the `specbench` CLI in embedded mode with the stand-in SGLang, and the Bolt app
over signed HTTP with the Slack stand-in. The stand-in server logs the SHA-256 of what it got
(STANDIN_DIGEST_ENV), so a test sees the value arrived while no log holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.chat.router import Access
from bot.slack.app import SpecbenchBot
from bot.slack.http import asgi_app
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import BOT_TOKEN, SIGNING_SECRET, BotServer, free_port, summaries
from tests.standin.harness import STANDIN, Standin, make_standin
from tests.standin.slack_api import SlackStandin

REPO = Path(__file__).resolve().parents[2]
TOKEN = "hf_Zq8secretref-7d41c2b9e0a3"  # the worker's FOO_TOKEN: the preset's ${FOO_TOKEN}
LABEL = "label-secretref-5be8f13a"  # the worker's FOO_LABEL, under a name that looks harmless
VALUES = (TOKEN, LABEL)
PRESET = """\
name: refs
description: env secrets as references
engine: sglang
metric: output_throughput
reps: 1
warmup: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}}
overridable: [FOO_TOKEN]
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8}}
  env:
    FOO_TOKEN: ${{FOO_TOKEN}}
    MODEL_LABEL: ${{FOO_LABEL}}
    STANDIN_DIGEST_ENV: FOO_TOKEN,MODEL_LABEL
    STANDIN_PRINT_ENV: FOO_TOKEN,MODEL_LABEL
    STANDIN_STARTUP_S: "0.2"
    STANDIN_TAG: "{tag}"
approaches:
  - name: unset
    hypothesis: a reference the worker's environment lacks
    env: {{OTHER_TOKEN: "${{FOO_MISSING}}"}}
  - name: crash
    hypothesis: a server that logs its environment, then dies (its log tail goes to Slack)
    env: {{STANDIN_MODE: crash}}
"""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def leaks(*texts: str | bytes) -> list[str]:
    """Which of the secret values appear in any of `texts`."""
    blob = b"".join(t.encode() if isinstance(t, str) else t for t in texts)
    return [value for value in VALUES if value.encode() in blob]


def everything_under(folder: Path) -> bytes:
    """Every file below `folder`, bytes (the SQLite database, its journal, every log)."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    (config_copy / "presets" / "refs.yaml").write_text(PRESET.format(tag=setup.tag))
    monkeypatch.setenv("FOO_TOKEN", TOKEN)
    monkeypatch.setenv("FOO_LABEL", LABEL)
    monkeypatch.delenv("FOO_MISSING", raising=False)
    return setup


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args], cwd=REPO, capture_output=True,
        text=True, timeout=240,
        env={**(env or os.environ), "PYTHONPATH": os.pathsep.join((str(STANDIN), str(REPO)))},
    )


def server_log(data: Path) -> str:
    (log,) = (data / "logs").glob("b-*/baseline.log")
    return log.read_text()


@pytest.mark.timeout(300)
def test_a_reference_reaches_the_server_and_nothing_else(
    tmp_path: Path, standin: Standin
) -> None:
    data = tmp_path / "data"
    done = cli("run", "refs", "--format", "json")
    assert done.returncode == 0, done.stderr
    standin.assert_clean()

    # The server got the worker's values (their digests), and its log shows neither.
    log = server_log(data)
    assert f"environment sha256: FOO_TOKEN={sha256(TOKEN)}" in log, log
    assert f"environment sha256: MODEL_LABEL={sha256(LABEL)}" in log
    assert "environment: FOO_TOKEN=***" in log and "environment: MODEL_LABEL=***" in log

    # A reference the worker lacks fails its configuration as bad-config, naming the variable.
    report = json.loads(done.stdout)
    (unset,) = [r for r in report["results"] if r["approach"] == "unset"]
    assert (unset["verdict"], unset["cause"]) == ("failed", "bad-config"), unset
    assert "${FOO_MISSING} is not set in the worker's environment" in unset["why"]
    assert any("Set FOO_MISSING in the environment of the worker" in step["action"]
               for step in report["next_steps"]), report["next_steps"]

    # Nowhere: the CLI's output, the data dir (database, server and bench logs).
    assert leaks(done.stdout, done.stderr) == []
    stored = everything_under(data)
    assert leaks(stored) == []
    assert b"${FOO_TOKEN}" in stored and b"${FOO_LABEL}" in stored  # the plan keeps references

    # `show` in a process that does not know the values: the records keep the references.
    blind = {k: v for k, v in os.environ.items() if k not in ("FOO_TOKEN", "FOO_LABEL")}
    shown = cli("show", "--format", "jsonl", env=blind)
    assert shown.returncode == 0, shown.stderr
    baseline = json.loads(shown.stdout.splitlines()[0])
    assert baseline["env"]["FOO_TOKEN"] == "${FOO_TOKEN}"
    assert baseline["env"]["MODEL_LABEL"] == "${FOO_LABEL}"
    assert leaks(shown.stdout, shown.stderr) == []


@pytest.mark.parametrize(("where", "text"), [
    ("baseline", "    FOO_TOKEN: ${FOO_TOKEN}\n"),
    ("approach", "    env: {OTHER_TOKEN: \"${FOO_MISSING}\"}\n"),
    ("sweep", None),
])
def test_a_literal_secret_in_a_preset_is_refused_and_nothing_stored(
    tmp_path: Path, standin: Standin, config_copy: Path, where: str, text: str | None
) -> None:
    preset = config_copy / "presets" / "refs.yaml"
    yaml = preset.read_text()
    if where == "baseline":
        yaml = yaml.replace(text or "", f"    FOO_TOKEN: {TOKEN}\n")
    elif where == "approach":
        yaml = yaml.replace(text or "", f"    env: {{MY_API_KEY: \"{TOKEN}\"}}\n")
    else:
        yaml += f"sweep:\n  name: s\n  grid:\n    OTHER_PASSWORD: [\"${{FOO_LABEL}}\", {LABEL}]\n"
    preset.write_text(yaml)
    done = cli("run", "refs")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "refs.yaml:" in line and "holds a literal secret: write" in line, line
    assert "${" in line and leaks(done.stdout, done.stderr) == []
    assert not (tmp_path / "data" / "specbench.db").exists() or not Store().list_batches()


def test_a_literal_secret_through_set_is_refused_and_a_reference_is_not(
    tmp_path: Path, standin: Standin
) -> None:
    done = cli("run", "refs", "--set", f"FOO_TOKEN={TOKEN}")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert '--set env FOO_TOKEN holds a literal secret: write FOO_TOKEN: "${FOO_TOKEN}"' in line
    assert leaks(done.stdout, done.stderr) == []
    assert not (tmp_path / "data" / "specbench.db").exists() or not Store().list_batches()


# --------------------------------------------------------------------------- through Slack


def start_real_bot(dispatcher: EmbeddedDispatcher, slack: SlackStandin) -> BotServer:
    """The Bolt app over HTTP with the real engines (conftest's start_bot fakes them)."""
    import asyncio
    import threading

    import uvicorn

    bot = SpecbenchBot(dispatcher, token=BOT_TOKEN, signing_secret=SIGNING_SECRET,
                       api_url=slack.url, access=Access.from_env(), interval=0.3)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi_app(bot), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the bot did not start"
        time.sleep(0.02)
    return BotServer(bot, port, server, thread)


@pytest.mark.timeout(300)
def test_a_reference_through_slack_leaves_no_value_in_any_call(
    tmp_path: Path, standin: Standin, slack_env: None
) -> None:
    slack = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(Store(f"sqlite:///{tmp_path / 'slack.db'}"))
    bot = start_real_bot(dispatcher, slack)
    try:
        answer = bot.command("run refs")
        assert answer.status_code == 200
        calls = slack.wait_for(
            lambda cs: bool(summaries(cs))
            and any(c.method == "files.completeUploadExternal" for c in cs), timeout=200)
        (row,) = dispatcher.store.list_batches()
        assert row.state in TERMINAL_STATES
        bot.click("specbench_logs", row.id)  # the server's log tail, posted privately
        calls = slack.wait_for(
            lambda cs: any(c.method == "chat.postEphemeral" and "FOO_TOKEN=" in
                           (c.body.get("text") or "") for c in cs), timeout=30)
    finally:
        bot.stop()
        dispatcher.close()
        slack.stop()
    standin.assert_clean()
    assert f"environment sha256: FOO_TOKEN={sha256(TOKEN)}" in server_log(tmp_path / "data")
    logs = next(c for c in calls if c.method == "chat.postEphemeral"
                and "FOO_TOKEN=" in (c.body.get("text") or ""))
    assert "FOO_TOKEN=***" in logs.body["text"] and "MODEL_LABEL=***" in logs.body["text"]
    assert "${FOO_MISSING} is not set" in logs.body["text"]
    raw = [c.raw for c in slack.recorded(status=None)]
    assert leaks(answer.content, *raw) == []
    assert b"${FOO_MISSING}" in b"".join(raw)  # the failure names the reference
    assert leaks((tmp_path / "slack.db").read_bytes(), everything_under(tmp_path / "data")) == []
