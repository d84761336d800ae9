"""A batch with a capacity search, judged (docs/contracts.md "Capacity under the SLO"): each
result's capacity against the baseline's (one bisection step and the minimum effect), the
goodput beside it, the key achievement and next steps that consider it, `metric: capacity`,
a restarted or bracketed baseline, and the words and chart every surface shows. Records are
built as the engines make them: `section` over levels measured in the search's order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from jobs.charts.capacity import capacity_figure, rows_of
from jobs.core.advice import analyze, load_remedies
from jobs.core.capacity import Spec, amount, measured, next_load, section
from jobs.core.events import Event
from jobs.core.messages import render_report
from jobs.core.noise import merge_starts
from jobs.core.progress import level_text, outcome_text
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from tests.conftest import make_record

SLO = {"p99_ttft_ms": 3000.0}
SPEC = Spec("max-concurrency", 1, 512)


def searched(capacity: float, *, spec: Spec = SPEC, tput: float = 100.0,
             key: str = "p99_ttft_ms") -> dict[str, Any]:
    """The record's `capacity` of a server whose TTFT crosses the limit just above
    `capacity` (two repetitions a level; throughput `tput` per request running)."""
    def figures(c: float) -> dict[str, list[float]]:
        over = 2900.0 if c <= capacity else 3100.0
        return {key: [over, over], "output_throughput": [tput * c, tput * c]}

    levels, entries = [], []
    while (load := next_load(spec, levels)) is not None:
        metrics = figures(load)
        entries.append({"load": spec.load(load), "metrics": metrics, "status": "ok",
                        "warmup": None, "repetitions": []})
        levels.append(measured(load, metrics, {key: 3000.0}))
    return section(spec, entries, {key: 3000.0})


def run(name: str, capacity: float, *, samples: Sequence[float] = (100.0, 101.0),
        **kwargs: Any) -> RunRecord:
    found = searched(capacity)
    first = found["levels"][0]["metrics"]
    record = make_record(name, samples=samples, extra={"capacity": found}, **kwargs)
    return dataclasses.replace(record, metrics={**record.metrics, **{
        k: v for k, v in first.items() if k != "output_throughput"}})


def report_of(records: Sequence[RunRecord], *, metric: str = "output_throughput",
              min_effect: float = 2.0) -> dict[str, Any]:
    return analyze(records, metric=Metric(metric, min_effect_pct=min_effect,
                                          slo=tuple(SLO.items()), requests=1000),
                   rules=load_rules(), remedies=load_remedies())


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["approach"]: r for r in report["results"]}


def test_two_capacities_differ_only_by_at_least_one_bisection_step_and_the_minimum_effect(
        ) -> None:
    report = report_of([run("baseline", 100), run("fewer", 60), run("one-less", 99),
                        run("more", 120), run("step-apart", 105)], min_effect=6.0)
    results = by_name(report)
    assert results["fewer"]["capacity"]["verdict"] == "regressed"
    assert results["fewer"]["capacity"]["delta_pct"] == -40.0
    assert results["fewer"]["capacity"]["why"] == (
        "fewer carries 60 concurrent requests within the SLO, the baseline 100: regressed "
        "−40%; p99_ttft_ms binds")
    assert results["more"]["capacity"]["verdict"] == "improved"
    # one request apart: within one bisection step at 100 (the coarser of 1 and 2% of 100)
    assert results["one-less"]["capacity"]["verdict"] == "unchanged"
    assert "within one bisection step, 2 requests" in results["one-less"]["capacity"]["why"]
    # more than a step apart but under 6%, below the 6% minimum effect
    assert results["step-apart"]["capacity"]["verdict"] == "unchanged"
    assert "below the 6% minimum effect" in results["step-apart"]["capacity"]["why"]
    assert report["baseline"]["capacity"]["value"] == 100
    assert report["baseline"]["capacity"]["binding"] == "p99_ttft_ms"
    assert report["capacity"] == {"knob": "max-concurrency", "from": 1, "max": 512,
                                  "slo": SLO, "slo_caveats": [], "slo_samples": None}


def test_the_goodput_is_the_throughput_at_capacity() -> None:
    report = report_of([run("baseline", 40), run("fewer", 24)])
    assert report["baseline"]["capacity"]["goodput"] == 4000.0
    fewer = by_name(report)["fewer"]["capacity"]
    assert (fewer["goodput"], fewer["goodput_key"], fewer["load"]) == (
        2400.0, "output_throughput", {"max-concurrency": 24})


def test_no_capacity_is_below_any_and_two_at_max_cannot_be_told_apart() -> None:
    records = [run("baseline", 600), run("none", 0), run("also-max", 600)]
    results = by_name(report_of(records))
    assert results["none"]["capacity"]["value"] is None
    assert results["none"]["capacity"]["verdict"] == "regressed"
    assert results["none"]["capacity"]["why"].startswith(
        "none breaks the SLO even at max-concurrency 1 (p99_ttft_ms 3100 ms > 3000 ms)")
    assert results["also-max"]["capacity"]["verdict"] == "unchanged"
    assert "both hold up to the most the search tries" in results["also-max"]["capacity"]["why"]
    neither = by_name(report_of([run("baseline", 0), run("none", 0)]))["none"]["capacity"]
    assert neither["verdict"] == "inconclusive"


def test_a_run_the_rules_cannot_compare_takes_its_results_verdict() -> None:
    failed = make_record("oom", samples=[], status="failed",
                         log_tail="torch.OutOfMemoryError: CUDA out of memory.",
                         extra={"capacity": searched(8)})
    confounded = run("confounded", 80, server_args={"model-path": "/models/other"})
    results = by_name(report_of([run("baseline", 40), failed, confounded]))
    assert results["oom"]["capacity"]["verdict"] == "failed"
    assert results["confounded"]["verdict"] == "inconclusive"
    assert results["confounded"]["capacity"]["verdict"] == "inconclusive"
    assert results["confounded"]["capacity"]["why"] == results["confounded"]["why"]


def test_the_key_achievement_considers_capacity() -> None:
    """Faster at one request but carrying fewer within the SLO is no key achievement: it is
    adopted only up to its capacity; the one that carries more is the key achievement."""
    records = [run("baseline", 40), run("fast-alone", 24, samples=(150.0, 151.0)),
               run("carries-more", 48, samples=(100.0, 100.5))]
    report = report_of(records)
    key = report["key_achievement"]
    assert (key["approach"], key["metric"], key["value"], key["delta_pct"]) == (
        "carries-more", "capacity", 48, 20.0)
    assert key["text"] == "carries 48 concurrent requests within the SLO"
    adopt = [s for s in report["next_steps"] if s["kind"] == "adopt"]
    assert adopt[0]["approach"] == "carries-more"
    assert adopt[0]["why"].startswith("the largest capacity gain: carries-more carries 48")
    assert adopt[1]["approach"] == "fast-alone"
    assert adopt[1]["action"].startswith(
        "Adopt fast-alone only up to its capacity, max-concurrency 24")
    accept = report["next_steps"][-1]
    assert "carries 48 concurrent requests within the SLO" in accept["action"]
    alone = report_of(records[:2])
    assert alone["key_achievement"] is None  # the only win regressed its capacity


def test_with_metric_capacity_every_verdict_is_the_capacitys() -> None:
    records = [run("baseline", 40), run("fewer", 24), run("more", 48), run("none", 0)]
    report = report_of(records, metric="capacity")
    results = by_name(report)
    assert [(r["verdict"], r["value"], r["delta_pct"]) for r in report["results"]] == [
        ("regressed", 24, -40.0), ("improved", 48, 20.0), ("regressed", None, None)]
    assert results["fewer"]["why"] == results["fewer"]["capacity"]["why"]
    assert report["baseline"]["value"] == 40 and report["baseline"]["status"] == "ok"
    assert report["key_achievement"]["approach"] == "more"
    text = render_report(report, "text")
    assert "● baseline 40" in text and "fewer carries 24 concurrent requests" in text


def test_a_restarted_configurations_capacity_is_the_lowest_its_starts_found() -> None:
    starts = [run("a", 40), run("a", 36), run("a", 44)]
    merged = merge_starts(starts)
    assert merged.extra["capacity"]["value"] == 36
    assert [s["capacity"]["value"] for s in merged.extra["starts"]] == [40, 36, 44]
    none = merge_starts([run("a", 40), run("a", 0)])
    assert none.extra["capacity"]["value"] is None


def test_a_change_within_the_baselines_own_move_is_inconclusive() -> None:
    base = run("baseline", 40)
    closing = {"metrics": base.metrics, "status": "ok", "capacity": searched(34)}
    bracketed = dataclasses.replace(base, extra={**base.extra, "bracket": closing})
    results = by_name(report_of([bracketed, run("fewer", 36), run("far-fewer", 20)]))
    assert results["fewer"]["capacity"]["verdict"] == "inconclusive"
    assert "the baseline's own capacity moved from 40 to 34" in \
        results["fewer"]["capacity"]["why"]
    assert results["far-fewer"]["capacity"]["verdict"] == "regressed"


def test_every_format_shows_it() -> None:
    report = report_of([run("baseline", 40), run("fewer", 24)])
    text = render_report(report, "text")
    assert "Capacity: max-concurrency from 1 up to 512, doubling then bisecting to 2% or " \
        "1 request" in text
    assert "capacity: the baseline carries 40 concurrent requests within the SLO; " \
        "p99_ttft_ms binds · goodput 4000 tok/s at capacity" in text
    assert "capacity ▼ fewer carries 24 concurrent requests within the SLO, the baseline " \
        "40: regressed −40%; p99_ttft_ms binds" in text
    slack = render_report(report, "slack")
    assert "fewer carries 24 concurrent requests within the SLO, the baseline 40" in slack
    assert '"capacity": {' in render_report(report, "json")


def test_the_chart_draws_each_capacity_against_the_baselines_with_its_binding_key() -> None:
    report = report_of([run("baseline", 40), run("fewer", 24), run("none", 0)])
    rows = rows_of(report)
    assert [(r["name"], r["value"], r["verdict"]) for r in rows] == [
        ("baseline", 40, "baseline"), ("fewer", 24, "regressed"), ("none", None, "regressed")]
    figure = capacity_figure(report)
    assert figure is not None
    (axes,) = figure.axes
    notes = {t.get_gid(): t.get_text() for t in axes.texts}
    assert notes["note:baseline"] == "c=40 · p99_ttft_ms binds"
    assert notes["note:fewer"] == "c=24 · −40% · p99_ttft_ms binds"
    assert notes["note:none"].startswith("none: breaks the SLO at c=1")
    assert [line.get_xdata()[0] for line in axes.lines] == [40.0]  # the baseline's, dashed
    assert "p99_ttft_ms ≤ 3000" in axes.get_title(loc="left")
    figure.draw_without_rendering()
    frame = axes.get_window_extent()
    assert all(t.get_window_extent().x1 <= frame.x1 for t in axes.texts)  # inside the plot
    assert capacity_figure(report_of([make_record("baseline"), make_record("a")])) is None


def test_progress_names_each_level_the_search_chose_and_the_capacity_found() -> None:
    event: Event = {"type": "approach.phase", "phase": "level", "level": 3, "levels": 16,
                    "search": "capacity", "load": {"max-concurrency": 4}}
    assert level_text(event) == "capacity level 3 max-concurrency 4"
    finished: Event = {"type": "approach.finished", "verdict": "improved", "value": 120.0,
                       "delta_pct": 20.0, "metric": "output_throughput",
                       "capacity": {"knob": "max-concurrency", "value": 24,
                                    "binding": "p99_ttft_ms"}}
    assert outcome_text(finished) == \
        "improved 120 tok/s (+20.0%) · capacity c=24 (p99_ttft_ms binds)"


@pytest.mark.parametrize("knob,value,text", [("max-concurrency", 1, "1 concurrent request"),
                                             ("request-rate", 2.4, "2.4 requests a second")])
def test_a_capacity_in_words(knob: str, value: float, text: str) -> None:
    assert amount(Spec(knob, 1, 8), value) == text
