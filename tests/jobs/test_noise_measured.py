"""Noise, measured (issue 31, docs/contracts.md "Noise, measured"), through the real CLI and the
stand-in SGLang: a host that drifts during a batch, restarts, a single repetition, tail
percentiles over too few requests, a change across batches judged against its spread, a knob
set twice, and the overrides every report shows.

The commands run `bot.cli.main.main(argv)`, the `specbench` entry, in this process (its
environment and working folder set for the call alone, its output read with capsys), and their
batches' servers are stand-in processes; the drifting host's batch runs the real
`python -m bot.cli.main run` as a process of its own, the whole command from start to exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.store import Store
from tests.builders import specbench_here
from tests.conftest import FINGERPRINT, make_plan, make_record
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]
SERVER = ("{model-path: /models/tiny-llama, tp-size: 1, mem-fraction-static: 0.8, "
          "cuda-graph-max-bs: 8}")


def preset(name: str, *, approaches: str, extra: str = "", reps: int = 2,
           bench: str = "num-prompts: 2") -> str:
    return f"""\
name: {name}
engine: sglang
metric: output_throughput
min_effect_pct: 2.0
reps: {reps}
warmup: false
timeouts: {{startup_s: 60, bench_s: 30}}
bench: {{dataset-name: random-ids, random-input-len: 8, random-output-len: 4,
        random-range-ratio: 1.0, {bench}}}
overridable: [mem-fraction-static]
{extra}
baseline:
  server_args: {SERVER}
  env: {{STANDIN_STARTUP_S: "0.1", STANDIN_HEALTH_S: "0.05"}}
approaches:
{approaches}
"""


FASTER = """\
  - name: faster
    hypothesis: twice the decode speed
    env: {STANDIN_THROUGHPUT: "164"}
"""
SAME = """\
  - name: same
    hypothesis: a knob that changes nothing
    server_args: {cuda-graph-max-bs: 16}
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standin]:
    setup = make_standin(tmp_path, monkeypatch)
    yield setup
    setup.assert_clean()


Done = subprocess.CompletedProcess
Cli = Callable[..., "Done[str]"]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`specbench ARGS` in tmp_path, in this process (tests/builders.py `specbench_here`;
    `real`: the real `python -m bot.cli.main` in a process of its own); with `standin`, its
    servers note themselves in its info file and carry its tag (what its leak check looks for).
    `env` holds for this command alone."""

    def run(*args: str, env: dict[str, str] | None = None, standin: Standin | None = None,
            real: bool = False) -> Done[str]:
        extra = dict(env or {})
        if standin is not None:
            extra.update(STANDIN_INFO_FILE=str(standin.info_file), STANDIN_TAG=standin.tag)
        if real:
            merged = {**os.environ, **extra}
            merged["PYTHONPATH"] = os.pathsep.join(
                p for p in (merged.get("PYTHONPATH"), str(REPO)) if p)
            merged.pop("SPECBENCH_BROKER_URL", None)
            return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=tmp_path,
                                  env=merged, capture_output=True, text=True, timeout=170)
        return specbench_here(capsys, *args, env=extra, drop=("SPECBENCH_BROKER_URL",),
                              cwd=tmp_path)

    return run


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def drifting(tmp_path: Path, pct: float) -> dict[str, str]:
    """The stand-in host slower by `pct` % with each server started on it."""
    return {"STANDIN_HOST_FILE": str(tmp_path / "host-starts"),
            "STANDIN_HOST_DRIFT_PCT": str(pct)}


def result(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["approach"] == name)


@pytest.mark.timeout(200)
def test_a_host_that_drifts_is_named_and_changes_inside_the_drift_are_inconclusive(
    tmp_path: Path, standin: Standin, cli: Cli
) -> None:
    path = write(tmp_path, "drift", preset("drift", approaches=SAME + FASTER))
    done = cli("run", str(path), "--format", "json", env=drifting(tmp_path, 6),
               standin=standin, real=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    # four servers: the baseline first, both approaches, the baseline again last
    assert len(standin.notes("server")) == 4
    base = report["baseline"]
    first, last = base["bracket"]
    assert first == pytest.approx(82.0) and last == pytest.approx(82.0 * 0.94 ** 3)
    assert base["drift_pct"] == pytest.approx(-16.9, abs=0.05)
    assert base["value"] == pytest.approx(first)  # the first run's median stays the value
    assert sorted(base["samples"]) == pytest.approx([last, last, first, first])
    assert "the host drifted -16.9% during the batch" in base["drift"]
    same = result(report, "same")
    assert (same["verdict"], same["delta_pct"]) == ("inconclusive", -6.0)
    assert "within the host's drift" in same["why"] and "-16.9%" in same["why"]
    faster = result(report, "faster")  # 2 x 0.94^2 of the first: beyond the drift
    assert (faster["verdict"], faster["delta_pct"]) == ("improved", 76.7)
    retry = next(s for s in report["next_steps"] if s["approach"] == "same")
    assert retry["kind"] == "retry" and "starts: 2" in retry["action"]
    # the stored record keeps the closing run inside the baseline's; the text says so
    records = [json.loads(line) for line in cli("show", "--format", "jsonl").stdout.splitlines()]
    assert [r["approach"] for r in records] == ["baseline", "same", "faster"]
    assert records[0]["bracket"]["metrics"]["output_throughput"] == pytest.approx([last, last])
    text = cli("show").stdout
    assert "Drift: the host drifted -16.9% during the batch" in text
    assert "baseline measured first and again last" in text


@pytest.mark.timeout(200)
def test_starts_spread_the_repetitions_and_widen_the_range(tmp_path: Path, standin: Standin,
                                                          cli: Cli) -> None:
    path = write(tmp_path, "starts", preset("starts", approaches=FASTER, extra="starts: 2",
                                            reps=3))
    done = cli("run", str(path), "--format", "json", env=drifting(tmp_path, 10),
               standin=standin)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert len(standin.notes("server")) == 4  # two starts of each configuration, no bracket
    assert "bracket" not in report["baseline"]  # two configurations: nothing to bracket
    assert report["ran"] == {"reps": 3, "starts": 2, "bracket": False, "warmup": False}
    records = [json.loads(line) for line in cli("show", "--format", "jsonl").stdout.splitlines()]
    base = records[0]
    assert [len(s["metrics"]["output_throughput"]) for s in base["starts"]] == [2, 1]
    # the second start ran on a host 10 % slower: the range holds both starts
    assert base["metrics"]["output_throughput"] == pytest.approx([82.0, 82.0, 73.8])
    assert report["baseline"]["samples"] == pytest.approx([82.0, 82.0, 73.8])
    assert [r["start"] for r in base["repetitions"]] == [1, 1, 2]
    faster = result(report, "faster")  # 164 x 0.81 and x 0.729 against [73.8, 82]
    assert faster["verdict"] == "improved"
    assert "over 2 server starts" in cli("show").stdout


@pytest.mark.timeout(200)
def test_one_repetition_is_inconclusive_without_a_noise_figure(tmp_path: Path,
                                                             standin: Standin,
                                                             cli: Cli) -> None:
    path = write(tmp_path, "once", preset("once", approaches=FASTER))
    done = cli("run", str(path), "--reps", "1", "--format", "json",
               standin=standin)
    assert done.returncode == 0, done.stderr[-3000:]
    faster = result(json.loads(done.stdout), "faster")
    assert (faster["verdict"], faster["delta_pct"]) == ("inconclusive", 100.0)
    assert faster["why"] == "+100.0% (164 vs 82) from one repetition: no noise estimate"
    steps = json.loads(done.stdout)["next_steps"]
    assert steps[0]["kind"] == "retry" and "--reps 3" in steps[0]["action"]


P99 = "slo: {p99_ttft_ms: 5000}"


@pytest.mark.timeout(200)
def test_a_p99_over_eight_requests_is_refused_then_allowed_and_marked(
    tmp_path: Path, standin: Standin, cli: Cli
) -> None:
    few = write(tmp_path, "tail", preset("tail", approaches=FASTER, extra=P99,
                                         bench="num-prompts: 8"))
    refused = cli("run", str(few), standin=standin)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"specbench run: error: {few}:11: key slo.p99_ttft_ms: a p99 needs at least 100 "
        "requests per run, and the bench sends 8 (its p99 would be the slowest request); raise "
        "num-prompts, limit another key, or set `allow_few_samples: true` to judge it anyway, "
        "marked"]
    assert standin.notes("server") == []
    assert "no batch stored yet" in cli("show").stderr  # nothing stored
    allowed = write(tmp_path, "tail", preset("tail", approaches=FASTER,
                                             extra=P99 + "\nallow_few_samples: true",
                                             bench="num-prompts: 8"))
    done = cli("run", str(allowed), "--format", "json", standin=standin)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["slo_samples"] == "few"
    assert report["slo_caveats"] == ["p99 of 8 requests: the slowest"]
    assert "SLO: p99_ttft_ms ≤ 5000 ms (p99 of 8 requests: the slowest)" in cli(
        "show").stdout


def test_a_knob_set_twice_is_refused_on_every_surface(tmp_path: Path, standin: Standin,
                                                      cli: Cli) -> None:
    path = write(tmp_path, "twice", preset("twice", approaches=FASTER))
    done = cli("run", str(path), "--set", "mem-fraction-static=0.7", "--set",
               "mem-fraction-static=0.75", standin=standin)
    assert done.returncode == 2
    assert done.stderr.strip() == ("specbench run: error: --set mem-fraction-static is given "
                                   "twice ('0.7', then '0.75'): set each knob once")
    chat = cli("console", "-c", "run cpu-demo --set threads=1 --set threads=2")
    assert chat.returncode == 2
    assert chat.stderr == ("Sorry: --set threads is given twice ('1', then '2'): set each knob "
                           "once\n")
    assert standin.notes("server") == []
    assert "no batch stored yet" in cli("show").stderr


@pytest.mark.timeout(200)
def test_overrides_are_in_every_format(tmp_path: Path, standin: Standin, cli: Cli) -> None:
    path = write(tmp_path, "over", preset("over", approaches=FASTER))
    done = cli("run", str(path), "--set", "mem-fraction-static=0.75",
               standin=standin)
    assert done.returncode == 0, done.stderr[-3000:]
    line = ("Ran with: --set mem-fraction-static=0.75 · 2 reps per configuration · baseline "
            "measured once")
    assert line in done.stdout.splitlines()
    report = json.loads(cli("show", "--format", "json").stdout)
    assert report["overrides"] == {"mem-fraction-static": 0.75}
    blocks = json.loads(cli("show", "--format", "slack").stdout)
    assert line in json.dumps(blocks, ensure_ascii=False)


# --------------------------------------------------------------------------- across batches

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=10)


def stored(store: Store, batch: str, base: list[float], *, days: int) -> None:
    """An ended batch of preset `nightly` on host gpu-1: its baseline's samples given."""
    plan = make_plan(preset="nightly")
    records = [make_record("baseline", samples=base, batch=batch, preset="nightly",
                           fingerprint=dict(FINGERPRINT), server_args=dict(plan.configs[0]
                                                                           .server_args)),
               make_record("eagle3", samples=[60.0, 61.0, 62.0], batch=batch,
                           preset="nightly", fingerprint=dict(FINGERPRINT),
                           server_args=dict(plan.configs[1].server_args),
                           change=plan.configs[1].change)]
    store.create_batch(batch_id=batch, preset="nightly", engine="local", queue="default",
                       requested_by="U1", plan=plan, created_at=T0 + timedelta(days=days))
    store.put_records(list(enumerate(records)))
    store.end(batch, "done", host="gpu-1", report={"batch": batch, "preset": "nightly", "results": [
        {"approach": "eagle3", "verdict": "regressed", "value": 61.0, "delta_pct": -30.0}]})


def test_compare_judges_a_change_against_the_spread_of_earlier_batches(cli: Cli) -> None:
    with Store() as store:
        for day, base in enumerate(([82.0, 83.0, 84.0], [74.0, 75.0, 76.0],
                                    [88.0, 89.0, 90.0], [86.0, 86.5, 87.0])):
            stored(store, f"b-e{day}", base, days=day)
        stored(store, "b-within", [76.0, 77.0, 78.0], days=5)  # -11 % against b-e3: noise
        stored(store, "b-fell", [60.0, 61.0, 62.0], days=6)
    within = json.loads(cli("compare", "b-e3", "b-within", "--format", "json").stdout)
    row = next(r for r in within["approaches"] if r["approach"] == "baseline")
    assert row["change_pct"] == pytest.approx(-11.0)
    assert row["spread"]["state"] == "within" and row["spread"]["n"] == 4
    assert row["beyond_noise"] is False
    assert row["spread"]["text"].startswith("within its usual spread (±") and \
        row["spread"]["text"].endswith("% over 4 batches)")
    text = cli("compare", "b-e3", "b-within").stdout
    assert "Moved beyond noise: none" in text
    fell = json.loads(cli("compare", "b-within", "b-fell", "--format", "json").stdout)
    row = next(r for r in fell["approaches"] if r["approach"] == "baseline")
    assert row["beyond_noise"] is True and row["direction"] == "worse"
    assert row["spread"]["state"] == "regressed" and row["spread"]["n"] == 5
    assert "beyond its usual spread" in row["spread"]["text"]
    assert "over 5 batches" in row["spread"]["text"]
    # two batches only: the change is named unconfirmed
    early = json.loads(cli("compare", "b-e0", "b-e1", "--format", "json").stdout)
    row = next(r for r in early["approaches"] if r["approach"] == "baseline")
    assert row["spread"]["state"] == "unconfirmed" and row["spread"]["n"] == 1
    assert row["beyond_noise"] is True  # −9.6 %, ranges apart: moved, but unconfirmed


def test_the_digest_lists_no_regression_within_the_usual_spread(cli: Cli) -> None:
    """The issue's case: the same configuration 16% lower than the batch before, on the same
    host and stack, within what its earlier batches spread over: no regression. A fall beyond
    the spread is one, named with the batches it rests on."""
    with Store() as store:
        for day, base in enumerate(([82.0, 83.0, 84.0], [70.0, 71.0, 72.0],
                                    [86.0, 87.0, 88.0], [84.0, 85.0, 86.0])):
            stored(store, f"b-e{day}", base, days=day)
        stored(store, "b-wobble", [70.5, 71.5, 72.5], days=5)  # -16 % against b-e3
    digest = json.loads(cli("digest", "--days", "30", "--format", "json").stdout)
    moved = {r["to"]["batch"]: r for r in digest["regressions"] if r["what"] == "baseline"}
    assert "b-wobble" not in moved  # within its usual spread over 4 batches
    # b-e1's fall against b-e0 alone rests on one earlier batch: listed, and named unconfirmed
    assert list(moved) == ["b-e1"] and moved["b-e1"]["spread"]["state"] == "unconfirmed"
    assert "unconfirmed: 1 earlier batch on this host and stack" in moved["b-e1"]["same"]
    with Store() as store:
        stored(store, "b-fell", [55.0, 56.0, 57.0], days=6)
    digest = json.loads(cli("digest", "--days", "30", "--format", "json").stdout)
    (fell,) = [r for r in digest["regressions"]
               if r["what"] == "baseline" and r["to"]["batch"] != "b-e1"]
    assert fell["to"]["batch"] == "b-fell" and fell["spread"]["n"] == 5
    assert "beyond its usual spread" in fell["same"] and "over 5 batches" in fell["same"]
