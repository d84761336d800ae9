"""A sweep that maximises capacity (issue 36, "Must show"): with `metric: capacity` each point's
value is the capacity its server carried within the SLO, the sweep picks the point with the
highest, and its confirmation (a second batch of the baseline and the winner, searching again)
confirms it by the capacity verdict. Through the real `specbench run` on the stand-in SGLang,
whose TTFT grows by STANDIN_TTFT_GROWTH per request running (tests/standin/standin_load.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]

PRESET = """\
name: capacity-sweep
description: the TTFT growth that carries the most requests within the SLO
engine: sglang
metric: capacity
min_effect_pct: 5.0
reps: 2
warmup: false
bracket: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: 32}}
capacity: {{knob: max-concurrency, from: 1, max: 32}}
slo: {{median_ttft_ms: 300}}
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                cuda-graph-max-bs: 8}}
  env: {{STANDIN_STARTUP_S: "0.2", STANDIN_TAG: "{tag}", STANDIN_INFO_FILE: "{info}",
        STANDIN_TTFT_MS: "120", STANDIN_TTFT_GROWTH: "0.2", STANDIN_THROUGHPUT: "820"}}
approaches: []
sweep:
  name: growth
  grid:
    STANDIN_TTFT_GROWTH: ["0.4", "0.1", "0.05"]
  confirm_reps: 2
"""
# 120 ms (1 + g (c - 1)) <= 300 ms: c <= 1 + 1.5 / g. The figures are the load model's, not
# the clock's (tests/standin/sglang/_bench.py): at 820 tokens/s the server holds each request
# 5 ms instead of 50, and every level's 32 requests pass ten times as fast.
CAPACITY = {"0.2": 8, "0.4": 4, "0.1": 16, "0.05": 31}


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_capacity_sweep_picks_and_confirms_the_point_that_carries_the_most(
        tmp_path: Path, standin: Standin) -> None:
    path = tmp_path / "capacity-sweep.yaml"
    path.write_text(PRESET.format(tag=standin.tag, info=standin.info_file))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((os.environ["PYTHONPATH"], str(REPO)))}
    env.pop("SPECBENCH_BROKER_URL", None)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", str(path), "--format",
                           "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=580)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    values = {r["approach"].split("=")[1].strip("'"): r["value"] for r in report["results"]}
    assert values == {g: CAPACITY[g] for g in ("0.4", "0.1", "0.05")}  # each point's capacity
    assert report["baseline"]["value"] == CAPACITY["0.2"]
    winner = "growth@STANDIN_TTFT_GROWTH='0.05'"
    sweep = report["sweep"]
    assert sweep["best"]["approach"] == winner and sweep["best"]["value"] == 31
    assert sweep["objective"].startswith("capacity")
    confirmation = sweep["confirmation"]
    assert confirmation["approach"] == winner and confirmation["verdict"] == "improved"
    assert confirmation["value"] == 31 and confirmation["delta_pct"] == pytest.approx(287.5)
    assert report["key_achievement"]["approach"] == winner
    assert report["key_achievement"]["metric"] == "capacity"
    worst = next(r for r in report["results"] if r["approach"].endswith("'0.4'"))
    assert worst["verdict"] == "regressed" and worst["capacity"]["verdict"] == "regressed"
    assert "carries 4 concurrent requests within the SLO, the baseline 8" in worst["why"]
    # one server per configuration: the baseline, three points, and the confirmation's two
    assert len(standin.notes("server")) == 6
