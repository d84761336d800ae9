"""A failure of the benchmark is no dead end of the server configuration (issue 32, item 1),
through the real `specbench run` (a process of its own) and `show` (`bot.cli.main.main`, the same
entry, in this process): the local engine's bench refusing `output-len: 0`, and the stand-in
SGLang's bench_serving failing for want of a dataset it cannot download. Under other bench settings
the configuration runs as if it never failed; under the same ones it is a known dead end, and its
why says what re-opens it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import needs, specbench_here, standin_preset
from tests.conftest import REPO
from tests.standin.harness import Standin, make_standin

LOCAL = """\
name: {name}
description: prompt lookup on the tiny Llama
engine: local
metric: output_throughput
min_effect_pct: 5.0
reps: 1
warmup: false
timeouts: {{startup_s: 120, bench_s: 60}}
bench: {bench}
baseline:
  server_args: {{hidden-size: 64, num-layers: 4, num-heads: 4, vocab-size: 1024, seed: 0,
                threads: 1}}
approaches:
  - name: prompt-lookup
    hypothesis: the output repeats the prompt, so n-gram lookup drafts for free
    server_args: {{prompt-lookup-num-tokens: 10}}
  - name: draft-own-vocab
    hypothesis: a draft with its own vocabulary (the engine refuses it, a real dead end)
    server_args: {{draft-layers: 1, draft-vocab-size: 2048}}
"""


def sglang(name: str, *, bench: dict[str, Any], tag: str, info: Path) -> str:
    """One change on the stand-in SGLang, its bench settings `bench` (over the tiny bench's)."""
    return standin_preset(
        name, description="one change on the stand-in SGLang", bench_s=30, warmup=False,
        bench=bench, overridable=None,
        env={"STANDIN_STARTUP_S": "0.1", "STANDIN_TAG": tag, "STANDIN_INFO_FILE": str(info)},
        approaches=[{"name": "chunked", "hypothesis": "smaller prefill chunks",
                     "server_args": {"chunked-prefill-size": 4096}}],
    )


# `random` reads ShareGPT, which a host without internet cannot download (the release's own
# failure, bench-dataset-offline: bad-config); `random-ids` needs nothing.
OFFLINE = {"dataset-name": "random", "max-concurrency": None}
IDS = {"max-concurrency": None}


def specbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH"), str(REPO)) if p)}
    env.pop("SPECBENCH_BROKER_URL", None)
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=170)


Shown = subprocess.CompletedProcess


@pytest.fixture
def show(capsys: pytest.CaptureFixture[str]) -> Callable[..., Shown[str]]:
    """`specbench show ARGS` in this process (tests/builders.py `specbench_here`), in `cwd`,
    without a broker (as `specbench` above, whose environment is this process's)."""

    def shown(*args: str, cwd: Path) -> Shown[str]:
        return specbench_here(capsys, "show", *args, drop=("SPECBENCH_BROKER_URL",), cwd=cwd)

    return shown


def run(path: Path) -> dict[str, Any]:
    done = specbench("run", str(path), "--format", "json", cwd=path.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def result(report: dict[str, Any], approach: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["approach"] == approach]
    return found


def records(show: Callable[..., Shown[str]], batch: str, cwd: Path) -> dict[str, dict[str, Any]]:
    shown = show(batch, "--format", "jsonl", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    return {(r := json.loads(line))["approach"]: r for line in shown.stdout.splitlines()}


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


@pytest.mark.slow
@pytest.mark.timeout(300)
@needs("torch")
def test_a_bench_setting_the_client_refuses_poisons_no_other_preset(
    tmp_path: Path, show: Callable[..., Shown[str]]
) -> None:
    """The issue's case: `output-len: 0` fails every configuration (bad-config); then a preset
    with the same configurations and a good bench measures them, with no `known from` and no
    root cause it never had, while a real dead end of the server stays known."""
    bad, good = tmp_path / "zero.yaml", tmp_path / "fine.yaml"
    bad.write_text(LOCAL.format(name="zero", bench="{num-prompts: 2, input-len: 32, "
                                                   "output-len: 0}"))
    good.write_text(LOCAL.format(name="fine", bench="{num-prompts: 2, input-len: 32, "
                                                    "output-len: 16}"))
    first = run(bad)
    lookup = result(first, "prompt-lookup")
    assert (lookup["verdict"], lookup["cause"]) == ("failed", "bad-config")
    assert "--output-len: expected a positive value, got 0" in lookup["why"]

    second = run(good)
    lookup = result(second, "prompt-lookup")
    assert lookup["verdict"] != "failed" and lookup["value"] is not None, lookup
    assert "known from" not in lookup["why"]
    assert "known_from" not in records(show, second["batch"], tmp_path)["prompt-lookup"]
    own = result(second, "draft-own-vocab")  # a dead end of its server args, on any bench
    assert own["why"].startswith(f"known from {first['batch']}: "), own
    assert own["why"].endswith("re-opened by a change of its server args or env, or of the "
                               "stack (GPU, compute capability, driver, CUDA, torch, NCCL, the "
                               "engine local and its version)")
    assert second["root_cause"] is None  # one failure left, its own
    stored = records(show, first["batch"], tmp_path)  # what the first batch's records say
    assert stored["prompt-lookup"]["failed_in"] == "bench"
    assert stored["prompt-lookup"]["bench"] == {"num-prompts": 2, "input-len": 32,
                                                "output-len": 0}
    assert "failed_in" not in stored["draft-own-vocab"]  # the server refused it: its own


@pytest.mark.timeout(300)
def test_a_bench_that_fails_on_a_live_server_is_known_only_with_its_settings(
    tmp_path: Path, standin: Standin, show: Callable[..., Shown[str]]
) -> None:
    """bench_serving fails on a server that came up: the same preset again knows it (and says
    that a change of its bench settings re-opens it); with `random-ids` the same configurations
    run."""
    def preset(name: str, bench: dict[str, Any]) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(sglang(name, bench=bench, tag=standin.tag, info=standin.info_file))
        return path

    offline = preset("offline", OFFLINE)
    first = run(offline)
    chunked = result(first, "chunked")
    assert (chunked["verdict"], chunked["cause"]) == ("failed", "bad-config"), chunked
    servers = len(standin.notes("server"))

    again = run(offline)
    known = result(again, "chunked")
    assert known["why"].startswith(f"known from {first['batch']}: "), known
    assert "re-opened by a change of its bench settings, server args or env" in known["why"]
    assert len(standin.notes("server")) == servers + 1  # only the baseline started
    shown = show(again["batch"], cwd=tmp_path)
    assert "re-opened by a change of its bench settings" in shown.stdout
    slack = json.loads(show(again["batch"], "--format", "slack", cwd=tmp_path).stdout)
    assert any("not started" in text and "re-opened by a change of its bench settings" in text
               for block in slack["blocks"] if block["type"] == "section"
               for text in [block["text"]["text"]]), slack

    fine = run(preset("ids", IDS))
    measured = result(fine, "chunked")
    assert measured["value"] is not None and "known from" not in measured["why"], measured
    assert len(standin.notes("server")) == servers + 3
    assert records(show, first["batch"], tmp_path)["chunked"]["failed_in"] == "bench"
