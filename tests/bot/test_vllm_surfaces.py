"""A vLLM batch end to end through the CLI, the console, Slack and the compare command, on the
vLLM stand-in (tests/standin/vllm): improved with its accept length, out of memory, the custom
all-reduce fallback, a removed flag refused before any server starts, and bad input refused with
exit 2 before anything is stored.

The CLI's and the console's vLLM batches run the real `python -m bot.cli.main`, each in a process
of its own, as does one refusal of bad input; the SGLang batch `compare` needs beside the vLLM one,
what only reads the store (`compare`, `history`) and the other refusals (exit 2 and exit 1) run
`bot.cli.main.main` in this process with the environment the command would have had (`here`,
tests/builders.py); the Slack bot runs in this process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.engines import get_engine
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import BOT_TOKEN, SIGNING_SECRET, summaries  # noqa: F401
from tests.builders import specbench_here_as
from tests.standin.harness import STANDIN
from tests.standin.slack_api import SlackStandin

REPO = Path(__file__).resolve().parents[2]
BENCH = ("{dataset-name: random, random-input-len: 8, random-output-len: 4, num-prompts: 2, "
         "max-concurrency: 1}")
VDEMO = f"""\
name: vdemo
description: the article's experiment in small, on the vLLM stand-in
engine: vllm
reps: 2
warmup: false
timeouts: {{startup_s: 20, bench_s: 20}}
bench: {BENCH}
baseline:
  server_args: {{model: /models/tiny, tensor-parallel-size: 8, disable-custom-all-reduce: true}}
  env: {{STANDIN_STARTUP_S: "0.1"}}
approaches:
  - name: eagle3
    hypothesis: EAGLE-3 drafts cut the number of target forward passes
    server_args:
      speculative-config: {{method: eagle3, model: /models/tiny-eagle3, num_speculative_tokens: 3}}
    env: {{STANDIN_THROUGHPUT: "140"}}
  - name: more-memory
    hypothesis: more memory for the KV cache
    server_args: {{gpu-memory-utilization: 0.99}}
    env: {{STANDIN_MODE: fatal-then-hang, STANDIN_FATAL: oom}}
  - name: custom-allreduce
    hypothesis: the custom all-reduce kernel beats NCCL
    server_args: {{disable-custom-all-reduce: false}}
  - name: old-block-manager
    hypothesis: a flag an older vLLM had
    server_args: {{use-v2-block-manager: true}}
"""
SGLANG_TWIN = """\
name: stwin
description: the same model on the SGLang stand-in
engine: sglang
reps: 2
warmup: false
timeouts: {startup_s: 20, bench_s: 20}
bench: {dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}
baseline:
  server_args: {model-path: /models/tiny, tp-size: 1}
approaches:
  - name: faster
    hypothesis: more tokens per second
    env: {STANDIN_THROUGHPUT: "95"}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vllm-site")
    shutil.copytree(REPO / "config", root / "config")
    (root / "config" / "presets" / "vdemo.yaml").write_text(VDEMO)
    (root / "config" / "presets" / "stwin.yaml").write_text(SGLANG_TWIN)
    return root


def environment(site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update({"PYTHONPATH": os.pathsep.join([str(STANDIN), str(REPO)]),
                "SPECBENCH_VLLM_PYTHON": sys.executable, "SPECBENCH_SGLANG_PYTHON": sys.executable,
                "SPECBENCH_CONFIG_DIR": str(site / "config"),
                "SPECBENCH_DATA_DIR": str(site / "data"), "USER": "tester",
                "STANDIN_HEALTH_S": "0.02",  # SGLang's servers ready at once: nothing here times it
                **extra})
    return env


def specbench(site: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    (result,) = specbench_all(site, list(args), **extra)
    return result


def specbench_all(site: Path, *commands: list[str],
                  **extra: str) -> list[subprocess.CompletedProcess[str]]:
    """Several `specbench` commands at once (for those that do not depend on each other)."""
    procs = [(args, subprocess.Popen([sys.executable, "-m", "bot.cli.main", *args], text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                                     env=environment(site, **extra))) for args in commands]
    results = []
    for args, proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


Here = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]) -> Here:
    """`here(site, ARGS, **extra)`: what `specbench(site, ARGS, **extra)` runs, in this process
    (tests/builders.py `specbench_here_as`), with its subprocess's environment and folder."""
    return specbench_here_as(capsys, environment, REPO)


def by_approach(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["approach"]: r for r in report["results"]}


def check_vdemo(report: dict[str, Any]) -> None:
    results = by_approach(report)
    assert results["eagle3"]["verdict"] == "improved"
    assert 1.0 < results["eagle3"]["accept_length"] < 4.0
    assert (results["more-memory"]["verdict"], results["more-memory"]["cause"]) == (
        "failed", "out-of-memory")
    assert "No available memory for the cache blocks" in results["more-memory"]["why"]
    assert results["custom-allreduce"]["verdict"] == "inconclusive"
    assert "Custom allreduce is disabled" in results["custom-allreduce"]["why"]
    assert (results["old-block-manager"]["verdict"], results["old-block-manager"]["cause"]) == (
        "failed", "bad-config")
    assert "unrecognized arguments: --use-v2-block-manager" in results["old-block-manager"]["why"]
    assert report["fingerprint"].get("vllm") == "0.33.0"


def test_a_vllm_batch_through_the_cli_and_compare_names_the_engine(
    site: Path, here: Here,
) -> None:
    done = specbench(site, "run", "vdemo", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    check_vdemo(report)
    assert "old-block-manager: preflight failed" in done.stderr  # never started
    twin = here(site, "run", "stwin", "--format", "json")  # what compare needs beside it
    assert twin.returncode == 0, twin.stderr
    batches = [json.loads(twin.stdout)["batch"], report["batch"]]
    compared = here(site, "compare", *batches, "--format", "json")
    text = here(site, "compare", *batches)
    assert compared.returncode == 0, compared.stderr
    changes = {c["key"]: (c["a"], c["b"]) for c in json.loads(compared.stdout)["fingerprint"]}
    assert changes["engine"] == ("sglang", "vllm")
    assert "engine" in text.stdout and "sglang" in text.stdout and "vllm" in text.stdout


REAL = "a baseline flag the release lacks"  # the one refusal run as a process of its own
BAD = {
    REAL: (
        "server_args: {model: /m, use-v2-block-manager: true}",
        "unrecognized arguments: --use-v2-block-manager"),
    "no model": ("server_args: {tensor-parallel-size: 1}", "vLLM needs server_args.model"),
    "a mapping for a plain flag": ("server_args: {model: /m, max-num-seqs: {a: 1}}",
                                   "max-num-seqs takes no mapping"),
    "an unknown speculative key": (
        "server_args: {model: /m, speculative-config: {method: eagle3, num_spec_tokens: 3}}",
        "speculative-config has no key 'num_spec_tokens' (vLLM: Unexpected keyword argument); "
        "did you mean 'num_speculative_tokens'?"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_vllm_input_is_exit_2_with_one_line_and_nothing_stored(
    site: Path, tmp_path: Path, case: str, here: Here,
) -> None:
    """REAL runs the whole command as a process of its own, start to exit code; the other
    refusals and every `history` run in this process."""
    baseline, message = BAD[case]
    preset = tmp_path / "vbad.yaml"
    preset.write_text(f"name: vbad\nengine: vllm\nreps: 1\nbench: {BENCH}\n"
                      f"baseline:\n  {baseline}\n"
                      "approaches:\n  - name: eager\n    server_args: {enforce-eager: true}\n")
    data = tmp_path / "data"
    done = (specbench if case == REAL else here)(site, "run", str(preset),
                                                  SPECBENCH_DATA_DIR=str(data))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    history = here(site, "history", SPECBENCH_DATA_DIR=str(data))
    assert "vbad" not in history.stdout


def test_an_unknown_engine_lists_the_registered_ones(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    preset = tmp_path / "tgi.yaml"
    preset.write_text(f"name: tgi\nengine: tgi\nbench: {BENCH}\nbaseline:\n  server_args: {{}}\n"
                      "approaches:\n  - name: eager\n    server_args: {enforce-eager: true}\n")
    done = here(site, "run", str(preset))
    assert done.returncode == 2
    assert "unknown engine 'tgi'; known engines: local, sglang, vllm" in done.stderr


def test_no_vllm_behind_its_interpreter_is_exit_1(
    site: Path, tmp_path: Path, here: Here,
) -> None:
    done = here(site, "run", "vdemo", SPECBENCH_VLLM_PYTHON=str(tmp_path / "no-python"),
                SPECBENCH_DATA_DIR=str(tmp_path / "data"))
    assert done.returncode == 1
    assert f"SPECBENCH_VLLM_PYTHON={tmp_path / 'no-python'}: no such interpreter" in done.stderr


def test_a_vllm_batch_through_the_console(site: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "console", "-c", "/specbench run vdemo",
         "--timeout", "90"], capture_output=True, text=True, timeout=120, cwd=REPO,
        env=environment(site, SPECBENCH_DATA_DIR=str(tmp_path / "data")))
    assert done.returncode == 0, done.stderr
    thread = [line for line in done.stdout.splitlines() if line.startswith("  │ ")]
    assert any("eagle3: improved" in line for line in thread)
    assert any("Key achievement: eagle3" in line for line in thread)


def test_a_vllm_batch_through_slack(site: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.bot.conftest import start_bot

    for name, value in environment(site, SPECBENCH_DATA_DIR=str(tmp_path / "data")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    standin = SlackStandin().start()
    dispatcher = EmbeddedDispatcher(Store(), engine_factory=get_engine)
    bot = start_bot(dispatcher, standin, engine_for=get_engine)
    try:
        assert bot.command("run vdemo").status_code == 200
        calls = standin.wait_for(lambda cs: bool(summaries(cs)), timeout=90)
        rows = dispatcher.store.list_batches()
        deadline = time.monotonic() + 60
        while not all(r.state in TERMINAL_STATES for r in rows) and time.monotonic() < deadline:
            time.sleep(0.1)
            rows = dispatcher.store.list_batches()
    finally:
        bot.stop()
        dispatcher.close()
        standin.stop()
    (summary,) = summaries(calls)
    blocks = json.dumps(summary.body["blocks"])
    assert "eagle3" in blocks and "out-of-memory" in blocks and "bad-config" in blocks
    records = {r.approach: r for r in Store().records(rows[-1].id)}
    assert records["eagle3"].engine == "vllm" and records["eagle3"].accept_length
