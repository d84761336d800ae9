"""The report of a batch with load levels and an SLO (DESIGN23 "Report shape"): loads, slo, each
result's and the baseline's by_load, the crossover, the key achievement's load, the adopt step of
a mixed result; a batch without either reports exactly as before; `analyze` agrees with the
batch's own report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobs.batches.execution import build_report, metric_of
from jobs.batches.run_events import emit_finished
from jobs.core.advice import analyze, load_remedies
from jobs.core.events import Event
from jobs.core.levels import judge
from jobs.core.records import RunRecord, parse_lines
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, Verdict
from tests.conftest import REPO, SEED, make_plan, make_record, need_shared
from tests.jobs.test_level_verdicts import SLO, leveled
from tests.jobs.test_report import by_name, check_shape

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


def batch() -> list[RunRecord]:
    """eagle3 wins at low load and loses above 4; tuned wins most at 16, where it breaks the
    SLO, so its key level is 4; noisy cannot tell; oom fails."""
    ttft = [400.0, 500.0, 640.0, 900.0]
    return [
        leveled("baseline", [100.0] * 4, ttft=ttft),
        leveled("eagle3", [130.0, 112.0, 90.0, 70.0], ttft=ttft, accept_length=2.1,
                change={"server_args": {"speculative-algorithm": "EAGLE3"}}),
        leveled("tuned", [101.0, 140.0, 160.0, 100.5], ttft=[400.0, 500.0, 1420.0, 900.0],
                change={"server_args": {"cuda-graph-max-bs": 128}}),
        make_record("noisy", samples=[90.0, 110.0, 130.0],
                    extra={"by_load": [{"load": {"max-concurrency": n},
                                        "metrics": {"output_throughput": [90.0, 110.0, 130.0],
                                                    "p99_ttft_ms": [500.0] * 3},
                                        "status": "ok"} for n in (1, 4, 16, 64)]}),
        make_record("oom", status="failed", samples=[], log_tail=f"loading\n{OOM}\n"),
    ]


def report_of(records: list[RunRecord], metric: Metric = SLO) -> dict[str, Any]:
    return analyze(records, metric=metric, rules=load_rules(), remedies=load_remedies())


def test_the_report_has_the_levels_the_slo_and_each_result_by_load() -> None:
    report = report_of(batch())
    check_shape(report)
    assert report["loads"] == {"knob": "max-concurrency", "levels": [1, 4, 16, 64]}
    assert report["slo"] == {"p99_ttft_ms": 1000.0}
    base = report["baseline"]
    assert {k: base[k] for k in ("value", "status")} == {"value": 100.0, "status": "ok"}
    assert [(e["load"]["max-concurrency"], e["value"], e["status"], e["slo"])
            for e in base["by_load"]] == [(n, 100.0, "ok", "met") for n in (1, 4, 16, 64)]
    assert base["by_load"][2]["figures"] == {"output_throughput": 100.0, "p99_ttft_ms": 640.0}
    results = by_name(report)
    eagle = results["eagle3"]
    assert eagle["verdict"] == "mixed"
    assert (eagle["value"], eagle["delta_pct"]) == (130.0, 30.0)
    assert eagle["crossover"]["text"] == "improved up to max-concurrency 4, regressed from 16"
    assert [e["verdict"] for e in eagle["by_load"]] == [
        "improved", "improved", "regressed", "regressed"]
    assert set(eagle["by_load"][0]) == {
        "load", "verdict", "cause", "value", "delta_pct", "slo", "why", "figures"}
    tuned = results["tuned"]
    assert [e["verdict"] for e in tuned["by_load"]] == [
        "unchanged", "improved", "regressed", "unchanged"]
    assert tuned["by_load"][2]["why"].startswith(
        "p99_ttft_ms 1420 ms > 1000 ms limit at max-concurrency 16")
    assert results["noisy"]["verdict"] == "inconclusive"
    assert results["noisy"]["crossover"] is None
    assert results["oom"]["verdict"] == "failed"
    assert [e["verdict"] for e in results["oom"]["by_load"]] == ["failed"] * 4
    assert report["counts"] == {"mixed": 2, "inconclusive": 1, "failed": 1}


def test_the_key_achievement_is_the_largest_improvement_where_the_slo_is_met() -> None:
    report = report_of(batch())
    # tuned's +60% at 16 breaks the SLO; its +40% at 4 beats eagle3's +30% at 1
    assert report["key_achievement"] == {
        "approach": "tuned", "value": 140.0, "delta_pct": 40.0, "load": {"max-concurrency": 4},
    }
    # without the SLO the +60% at 16 counts
    plain = report_of(batch(), Metric())
    assert plain["key_achievement"]["load"] == {"max-concurrency": 16}
    assert plain["slo"] == {}


def test_a_mixed_result_is_adopted_up_to_its_crossover() -> None:
    steps = report_of(batch())["next_steps"]
    kinds = [s["kind"] for s in steps]
    assert kinds == sorted(kinds, key=("retry", "adopt", "remedy", "accept").index)
    assert kinds[0] == "retry" and steps[0]["approach"] == "noisy"
    adopts = [s for s in steps if s["kind"] == "adopt"]
    assert [(s["approach"], s["action"], s["load"]) for s in adopts] == [
        ("tuned", "Adopt tuned up to max-concurrency 4; keep the baseline from 16",
         {"max-concurrency": 4}),
        ("eagle3", "Adopt eagle3 up to max-concurrency 4; keep the baseline from 16",
         {"max-concurrency": 4}),
    ]
    assert adopts[0]["why"].startswith(
        "the largest improvement: +40.0% on output_throughput at max-concurrency 4")
    assert "cuda-graph-max-bs=128" in adopts[0]["why"]
    assert adopts[1]["why"].startswith("improved up to max-concurrency 4, regressed from 16")
    assert any(s["kind"] == "remedy" for s in steps)
    assert steps[-1]["kind"] == "accept" and "at max-concurrency 4" in steps[-1]["action"]


def test_an_improved_key_achievement_names_its_load() -> None:
    records = [leveled("baseline", [100.0] * 4), leveled("up", [105.0, 120.0, 110.0, 103.0])]
    report = report_of(records, Metric())
    assert report["key_achievement"]["load"] == {"max-concurrency": 4}
    adopt = next(s for s in report["next_steps"] if s["kind"] == "adopt")
    assert adopt["action"] == "Make up the new baseline"
    assert adopt["why"].endswith("+20.0% on output_throughput at max-concurrency 4")
    assert adopt["load"] == {"max-concurrency": 4}


def test_both_breaking_the_slo_is_no_retry() -> None:
    records = [leveled("baseline", [100.0] * 4, ttft=[1200.0] * 4),
               leveled("a", [100.0] * 4, ttft=[1100.0] * 4)]
    report = report_of(records)
    assert by_name(report)["a"]["verdict"] == "inconclusive"
    assert [s["kind"] for s in report["next_steps"]] == ["accept"]
    assert [e["slo"] for e in report["baseline"]["by_load"]] == ["violated"] * 4
    assert report["baseline"]["by_load"][0]["why"] == (
        "p99_ttft_ms 1200 ms > 1000 ms limit at max-concurrency 1")


def test_a_batch_without_loads_or_slo_reports_exactly_as_before() -> None:
    path = need_shared(SEED)
    records = list(parse_lines(path.read_text(encoding="utf-8").splitlines(), source=str(path)))
    snapshot = REPO / "tests" / "jobs" / "snapshots" / "seed_report.json"
    # the report of the commit before load levels, written with json.dumps(sort_keys, indent=1),
    # and since issue 31 the win its hypothesis does not explain (its why, its adopt step)
    before = snapshot.read_text(encoding="utf-8")
    now = json.dumps(report_of(records, Metric()), sort_keys=True, indent=1) + "\n"
    assert now == before


class ListSink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


def test_the_finished_event_carries_by_load() -> None:
    records = batch()
    plan = make_plan(loads={"max-concurrency": [1, 4, 16, 64]}, slo={"p99_ttft_ms": 1000.0})
    report = build_report(records, plan)
    sink = ListSink()
    emit_finished(sink, records[0], verdict=None, plan=plan, metric=metric_of(plan), index=0,
                  of=2)
    verdict = judge(records[1], records[0], metric=metric_of(plan), rules=load_rules())
    emit_finished(sink, records[1], verdict=verdict, plan=plan, metric=metric_of(plan), index=1,
                  of=2)
    base_event, eagle_event = sink.events
    assert base_event["by_load"] == report["baseline"]["by_load"]
    assert eagle_event["verdict"] == "mixed"
    assert eagle_event["by_load"] == by_name(report)["eagle3"]["by_load"]
    # without loads the event is as before
    sink = ListSink()
    emit_finished(sink, make_record("a"), verdict=Verdict("improved", None, 1.0, 1.0, "w"),
                  plan=make_plan(), metric=metric_of(make_plan()), index=1, of=2)
    assert "by_load" not in sink.events[0]


PRESET = """\
name: loaded
engine: sglang
metric: output_throughput
min_effect_pct: 2.0
reps: 3
bench: {dataset-name: random-ids, num-prompts: 64}
loads:
  max-concurrency: [1, 4, 16, 64]
slo:
  p99_ttft_ms: 1000
allow_few_samples: true
baseline:
  server_args: {model-path: /models/m, tp-size: 8, mem-fraction-static: 0.85,
                cuda-graph-max-bs: 512}
approaches:
  - name: eagle3
    hypothesis: drafts help
    server_args: {speculative-algorithm: EAGLE3}
  - name: tuned
    hypothesis: smaller graphs
    server_args: {cuda-graph-max-bs: 128}
"""


def test_analyze_of_stored_records_gives_the_batch_verdicts(
    config_copy: Path, tmp_path: Path
) -> None:
    (config_copy / "presets" / "loaded.yaml").write_text(PRESET, encoding="utf-8")
    records = [r for r in batch() if r.approach in ("baseline", "eagle3", "tuned")]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps({**r.to_dict(), "preset": "loaded"}) + "\n"
                            for r in records), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "analyze", str(runs), "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["slo"] == {"p99_ttft_ms": 1000.0}
    # the batch's own report, judged with its plan's metric and SLO (and its requests per run:
    # the preset's 64, too few for a p99, judged and marked "few")
    plan = make_plan(loads={"max-concurrency": [1, 4, 16, 64]}, slo={"p99_ttft_ms": 1000.0},
                     requests=64)
    own = build_report(records, plan)
    for name in ("eagle3", "tuned"):
        ours, theirs = by_name(report)[name], by_name(own)[name]
        assert (ours["verdict"], ours["by_load"]) == (theirs["verdict"], theirs["by_load"])
    assert by_name(report)["tuned"]["by_load"][2]["verdict"] == "regressed"
    assert report["key_achievement"] == own["key_achievement"]


def test_adopt_steps_follow_the_shape_of_the_crossover() -> None:
    records = [
        leveled("baseline", [100.0] * 4),
        leveled("late", [90.0, 95.0, 101.0, 120.0]),  # pays only once the GPU is busy
        leveled("zigzag", [110.0, 90.0, 110.0, 90.0]),
    ]
    report = report_of(records, Metric())
    adopts = {s["approach"]: s for s in report["next_steps"] if s["kind"] == "adopt"}
    assert report["key_achievement"]["approach"] == "late"
    assert (adopts["late"]["action"], adopts["late"]["load"]) == (
        "Adopt late from max-concurrency 64; keep the baseline up to 4", {"max-concurrency": 64})
    assert (adopts["zigzag"]["action"], adopts["zigzag"]["load"]) == (
        "Adopt zigzag at max-concurrency 1 and 16; keep the baseline at 4 and 64",
        {"max-concurrency": 16})
    assert by_name(report)["zigzag"]["crossover"]["text"] == (
        "improved at max-concurrency 1 and 16, regressed at 4 and 64")
