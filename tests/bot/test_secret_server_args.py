"""Secret-looking server args follow the env rule (issue 32, item 9): `api-key`, `hf-token`,
`admin-api-key`... take `${NAME}` only, in a preset, a sweep's grid or a `--set`; the worker
resolves the reference when it starts the server, and the store, `show --format jsonl`, the
records upload, the events and the server's log (whose command line SGLang echoes as
`server_args=ServerArgs(...)`) keep the reference or `***`, never the value.

Real processes: the `specbench` CLI in embedded mode with the stand-in SGLang, and the Bolt app
over signed HTTP with the Slack stand-in. The stand-in logs every parsed arg as the release
does, so `api_key='***'` in its log shows the value arrived and was masked at the source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import summaries
from tests.bot.test_secret_references import everything_under, start_real_bot
from tests.standin.harness import STANDIN, Standin, make_standin
from tests.standin.slack_api import SlackStandin

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-argref-9c1d7e40b2a6"  # the worker's SB_API_KEY: the preset's ${SB_API_KEY}
PRESET = """\
name: argrefs
description: a secret server arg as a reference
engine: sglang
metric: output_throughput
reps: 1
warmup: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}}
overridable: [api-key]
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                max-prefill-tokens: 16384, api-key: "${{SB_API_KEY}}"}}
  env:
    STANDIN_STARTUP_S: "0.2"
    STANDIN_TAG: "{tag}"
approaches:
  - name: unset
    hypothesis: a reference the worker's environment lacks
    server_args: {{api-key: "${{SB_MISSING}}"}}
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    (config_copy / "presets" / "argrefs.yaml").write_text(PRESET.format(tag=setup.tag))
    monkeypatch.setenv("SB_API_KEY", KEY)
    monkeypatch.delenv("SB_MISSING", raising=False)
    return setup


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args], cwd=REPO, capture_output=True,
        text=True, timeout=240,
        env={**(env or os.environ), "PYTHONPATH": os.pathsep.join((str(STANDIN), str(REPO)))},
    )


def leaks(*texts: str | bytes) -> bool:
    return any(KEY.encode() in (t.encode() if isinstance(t, str) else t) for t in texts)


def nothing_stored(tmp_path: Path) -> bool:
    return not (tmp_path / "data" / "specbench.db").exists() or not Store().list_batches()


@pytest.mark.timeout(300)
def test_a_secret_arg_reference_reaches_the_server_and_nothing_else(
    tmp_path: Path, standin: Standin
) -> None:
    data = tmp_path / "data"
    done = cli("run", "argrefs", "--format", "json")
    assert done.returncode == 0, done.stderr
    standin.assert_clean()

    # The server parsed the worker's value (masked where it logs its args), never the reference.
    (log,) = (data / "logs").glob("b-*/baseline.log")
    text = log.read_text()
    assert "api_key='***'" in text and "max_prefill_tokens=16384" in text, text
    assert "${SB_API_KEY}" not in text

    # A reference the worker lacks fails its configuration as bad-config, no server started.
    report = json.loads(done.stdout)
    (unset,) = [r for r in report["results"] if r["approach"] == "unset"]
    assert (unset["verdict"], unset["cause"]) == ("failed", "bad-config"), unset
    assert "server arg api-key: ${SB_MISSING} is not set in the worker's environment" in (
        unset["why"])
    assert any("Set SB_MISSING in the environment of the worker" in step["action"]
               for step in report["next_steps"]), report["next_steps"]
    (unset_log,) = (data / "logs").glob("b-*/unset.log")
    assert "ServerArgs" not in unset_log.read_text()  # its server never started

    assert not leaks(done.stdout, done.stderr, everything_under(data))
    assert b"${SB_API_KEY}" in everything_under(data)  # the plan and records keep it

    blind = {k: v for k, v in os.environ.items() if k != "SB_API_KEY"}
    shown = cli("show", "--format", "jsonl", env=blind)
    assert shown.returncode == 0, shown.stderr
    baseline = json.loads(shown.stdout.splitlines()[0])
    assert baseline["server_args"]["api-key"] == "${SB_API_KEY}"
    assert not leaks(shown.stdout, shown.stderr)


LITERALS = {
    "baseline": ('api-key: "${SB_API_KEY}"', f"api-key: {KEY}"),
    "approach": ('{api-key: "${SB_MISSING}"}', f'{{api-key: "{KEY}"}}'),
    "sweep": ("", f'sweep:\n  name: s\n  grid:\n    api-key: ["${{SB_API_KEY}}", {KEY}]\n'),
}


@pytest.mark.parametrize("where", list(LITERALS))
def test_a_literal_secret_arg_in_a_preset_is_refused_and_nothing_stored(
    tmp_path: Path, standin: Standin, config_copy: Path, where: str
) -> None:
    preset = config_copy / "presets" / "argrefs.yaml"
    old, new = LITERALS[where]
    text = preset.read_text()
    preset.write_text(text.replace(old, new) if old else text + new)
    done = cli("run", "argrefs")
    assert done.returncode == 2, (where, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert "argrefs.yaml:" in line and "api-key holds a literal secret: write " in line, line
    assert '-key: "${' in line and not leaks(done.stdout, done.stderr)
    assert nothing_stored(tmp_path)


def test_a_literal_secret_arg_through_set_is_refused(tmp_path: Path, standin: Standin) -> None:
    done = cli("run", "argrefs", "--set", f"api-key={KEY}")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert ('--set server arg api-key holds a literal secret: write api-key: "${API_KEY}"'
            in line), line
    assert not leaks(done.stdout, done.stderr) and nothing_stored(tmp_path)


@pytest.mark.timeout(300)
def test_through_slack_the_records_upload_keeps_the_reference(
    tmp_path: Path, standin: Standin, slack_env: None
) -> None:
    slack = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(Store(f"sqlite:///{tmp_path / 'slack.db'}"))
    bot = start_real_bot(dispatcher, slack)
    try:
        literal = bot.command(f"run argrefs --set api-key={KEY}")
        slack.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs), timeout=30)
        answer = bot.command("run argrefs --set api-key=${SB_API_KEY}")
        assert literal.status_code == 200 and answer.status_code == 200

        def uploaded_records(cs: list[Any]) -> bool:
            names = [c.body.get("filename", "") for c in cs
                     if c.method == "files.getUploadURLExternal"]
            done = sum(c.method == "files.completeUploadExternal" for c in cs)
            return bool(summaries(cs)) and any(n.endswith("-runs.jsonl") for n in names) \
                and done == len(names)

        calls = slack.wait_for(uploaded_records, timeout=200)
    finally:
        bot.stop()
        dispatcher.close()
        slack.stop()
    standin.assert_clean()
    refusal = next(c for c in calls if c.method == "chat.postEphemeral")
    assert "--set server arg api-key holds a literal secret" in refusal.body["text"]
    (row,) = dispatcher.store.list_batches()  # the refused one stored nothing
    assert row.state in TERMINAL_STATES and row.plan.overrides == {"api-key": "${SB_API_KEY}"}
    records = [c for c in slack.recorded(status=None) if c.method == "upload"
               and b'"server_args"' in c.raw]
    assert records, [c.method for c in calls]
    first = json.loads(records[0].raw.splitlines()[0])
    assert first["server_args"]["api-key"] == "${SB_API_KEY}"
    raw = [c.raw for c in slack.recorded(status=None)]
    assert not leaks(literal.content, answer.content, *raw)
    assert not leaks((tmp_path / "slack.db").read_bytes(), everything_under(tmp_path / "data"))
