"""Capacity under the SLO through the real `specbench run` on the stand-in SGLang (issue 36,
"Must show"): each configuration's capacity is the one the stand-in's load model implies (its
TTFT and TPOT grow with the requests running: tests/standin/standin_load.py), within the search's
precision; at most 16 levels; one server per configuration; and the binding key is the one
that breaks first, TPOT for the baseline and TTFT for the approach whose TTFT grows faster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from jobs.core.capacity import MAX_LEVELS, Spec
from tests.standin import standin_load
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]
# One request's tokens/s and TTFT on the stand-in. Its figures are the load model's, not the
# clock's (tests/standin/sglang/_bench.py): at 820 tokens/s (and a TPOT limit a tenth of 82's)
# its server holds each request 5 ms instead of 50, for the same capacities.
THROUGHPUT, TTFT_MS = 820.0, 120.0
SLO = {"median_ttft_ms": 500.0, "median_tpot_ms": 2.0}
MAX = 32
GROWTH = {"baseline": "0.1", "ttft-heavy": "0.4"}  # STANDIN_TTFT_GROWTH of each

PRESET = """\
name: capacity
description: capacity under the SLO on the stand-in
engine: sglang
metric: output_throughput
min_effect_pct: 2.0
reps: 2
warmup: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, num-prompts: {max}}}
capacity: {{knob: max-concurrency, from: 1, max: {max}}}
slo: {{median_ttft_ms: {ttft}, median_tpot_ms: {tpot}}}
baseline:
  server_args: {{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8,
                cuda-graph-max-bs: 8}}
  env: {{STANDIN_STARTUP_S: "0.2", STANDIN_TAG: "{tag}", STANDIN_INFO_FILE: "{info}",
        STANDIN_THROUGHPUT: "{throughput}", STANDIN_TTFT_MS: "{ttft_one}",
        STANDIN_TTFT_GROWTH: "{base_growth}"}}
approaches:
  - name: ttft-heavy
    hypothesis: a scheduler that admits requests later, so each waits longer for its first token
    env: {{STANDIN_TTFT_GROWTH: "{heavy_growth}"}}
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


def implied(growth: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str | None]:
    """The capacity the stand-in's own functions imply (its bench reports TTFT as one request's
    times ttft_factor, and TPOT as the time per token at speed(c)), and the key that breaks
    first above it."""
    with monkeypatch.context() as patch:
        patch.setenv("STANDIN_TTFT_GROWTH", growth)

        def figures(c: int) -> dict[str, float]:
            return {"median_ttft_ms": TTFT_MS * standin_load.ttft_factor(c),
                    "median_tpot_ms": 1000.0 / (THROUGHPUT * standin_load.speed(
                        c, speculative=False))}

        held = 0
        for c in range(1, MAX + 1):
            broken = [k for k, v in figures(c).items() if v > SLO[k]]
            if broken:
                return held, max(broken, key=lambda k: figures(c)[k] / SLO[k])
            held = c
    return held, None


def run(tmp_path: Path, standin: Standin, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((os.environ["PYTHONPATH"], str(REPO)))}
    env.pop("SPECBENCH_BROKER_URL", None)
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=280)


@pytest.mark.timeout(300)
def test_each_capacity_is_the_one_the_standins_load_model_implies(
        tmp_path: Path, standin: Standin, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(PRESET.format(
        max=MAX, ttft=SLO["median_ttft_ms"], tpot=SLO["median_tpot_ms"], tag=standin.tag,
        info=standin.info_file, throughput=THROUGHPUT, ttft_one=TTFT_MS,
        base_growth=GROWTH["baseline"], heavy_growth=GROWTH["ttft-heavy"]))
    done = run(tmp_path, standin, "run", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    shown = run(tmp_path, standin, "show", "--format", "jsonl")
    records = {r["approach"]: r for r in map(json.loads, shown.stdout.splitlines())}
    spec = Spec("max-concurrency", 1, MAX)
    expected = {name: implied(growth, monkeypatch) for name, growth in GROWTH.items()}
    assert expected == {"baseline": (13, "median_tpot_ms"), "ttft-heavy": (8, "median_ttft_ms")}
    for name, (capacity, binding) in expected.items():
        found = records[name]["capacity"]
        assert capacity - spec.precision(capacity) <= found["value"] <= capacity, found
        assert found["binding"] == binding and found["complete"] is True
        assert len(found["levels"]) <= MAX_LEVELS
        assert found["levels"][0]["load"] == {"max-concurrency": 1}
        # the record's own figures are its first level's
        assert records[name]["metrics"]["output_throughput"] == \
            found["levels"][0]["metrics"]["output_throughput"]
    # one server per configuration, every level on it; a bench run per repetition per level
    assert len(standin.notes("server")) == 2
    levels = sum(len(r["capacity"]["levels"]) for r in records.values())
    assert len(standin.notes("bench")) == levels * 2
    heavy = next(r for r in report["results"] if r["approach"] == "ttft-heavy")
    assert heavy["capacity"]["verdict"] == "regressed"
    assert heavy["capacity"]["why"] == (
        "ttft-heavy carries 8 concurrent requests within the SLO, the baseline 13: "
        "regressed −38.5%; median_ttft_ms binds")
    assert heavy["capacity"]["goodput"] == pytest.approx(_median(
        records["ttft-heavy"]["capacity"], 8, "output_throughput"))
    assert report["baseline"]["capacity"]["value"] == 13
    assert report["capacity"] == {"knob": "max-concurrency", "from": 1, "max": MAX,
                                  "slo": SLO, "slo_caveats": [], "slo_samples": None}
    text = run(tmp_path, standin, "show", "--format", "text").stdout
    assert "Capacity: max-concurrency from 1 up to 32" in text
    assert "capacity: the baseline carries 13 concurrent requests within the SLO; " \
        "median_tpot_ms binds" in text
    assert "capacity ▼ ttft-heavy carries 8 concurrent requests within the SLO" in text
    slack = run(tmp_path, standin, "show", "--format", "slack").stdout
    assert "ttft-heavy carries 8 concurrent requests within the SLO, the baseline 13" in slack
    # the records alone (their preset unknown to this config) judge the same, by the limits
    # the search kept; `--metric capacity` makes every verdict the capacity's
    runs = tmp_path / "runs.jsonl"
    runs.write_text(shown.stdout)
    again = json.loads(run(tmp_path, standin, "analyze", str(runs), "--format", "json").stdout)
    assert again["capacity"]["slo"] == SLO
    assert [r["capacity"] for r in again["results"]] == [r["capacity"] for r in report["results"]]
    by_capacity = run(tmp_path, standin, "analyze", str(runs), "--metric", "capacity",
                      "--format", "json")
    assert by_capacity.returncode == 0, by_capacity.stderr
    (judged,) = json.loads(by_capacity.stdout)["results"]
    assert (judged["verdict"], judged["value"], judged["delta_pct"]) == ("regressed", 8, -38.5)


def _median(found: Mapping[str, Any], load: int, key: str) -> float:
    level = next(lv for lv in found["levels"] if lv["load"]["max-concurrency"] == load)
    values = sorted(level["metrics"][key])
    return float(values[len(values) // 2] if len(values) % 2 else
                 (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2)
