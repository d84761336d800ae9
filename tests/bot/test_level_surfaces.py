"""Load levels wherever a person looks (issue 23 item 3): the text and Slack summaries show each
result's verdict per level, `mixed` with its crossover, the baseline's levels and SLO, the key
achievement's load and the SLO in the header; `compare` lists each level's verdict change; the
digest counts a mixed result as what it is; the progress line and the thread's progress message
name the level running. Reports are `analyze`'s (jobs.core.advice) or made by hand in its shape
(DESIGN23 "Report shape")."""

from __future__ import annotations

import copy
import dataclasses
import io
import re
from pathlib import Path
from typing import Any

import pytest

from bot import views
from bot.cli.progress import ProgressBar
from bot.thread.progress_message import ProgressMessage
from jobs.batches.run_events import phase_emitter
from jobs.commands.history import _summary_line
from jobs.core.advice import analyze, load_remedies
from jobs.core.digest import Side, build_digest, compare_batches
from jobs.core.events import CallbackSink, Event, make_event
from jobs.core.messages import render_blocks, render_report, render_text, summary_payload
from jobs.core.progress import outcome_text, phase_text
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.engines.sglang.engine import SGLangEngine
from tests.bot.test_small_text import table
from tests.conftest import make_plan, make_record
from tests.jobs.engines.test_served_levels import with_loads
from tests.jobs.test_digest import CHUNK_0, CHUNK_1, NOW, result, row, sweep_plan
from tests.jobs.test_level_verdicts import SLO, leveled
from tests.jobs.test_messages import check_slack_limits
from tests.standin.harness import make_standin

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
TTFT = [400.0, 500.0, 640.0, 900.0]


def records(batch: str = "b-test") -> list[RunRecord]:
    """eagle3 wins up to 4 and loses from 16; tuned wins most at 16 where it breaks the SLO;
    oom fails at every level."""
    out = [
        leveled("baseline", [100.0] * 4, ttft=TTFT),
        leveled("eagle3", [130.0, 112.0, 90.0, 70.0], ttft=TTFT,
                change={"server_args": {"speculative-algorithm": "EAGLE3"}}),
        leveled("tuned", [101.0, 140.0, 160.0, 100.5], ttft=[400.0, 500.0, 1420.0, 900.0],
                change={"server_args": {"cuda-graph-max-bs": 128}}),
        make_record("oom", status="failed", samples=[], log_tail=f"loading\n{OOM}\n"),
    ]
    return [r.__class__(**{**r.__dict__, "batch": batch}) for r in out]


def report_of(recs: list[RunRecord], metric: Metric = SLO) -> dict[str, Any]:
    return analyze(recs, metric=metric, rules=load_rules(), remedies=load_remedies())


def row_of(text: str, name: str) -> list[str]:
    """A result's row of the summary table and the lines that continue it."""
    lines = table(text)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name} "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] != " "), len(lines))
    return lines[start:end]


# --------------------------------------------------------------------------- text summary


def test_the_text_summary_shows_each_level_the_crossover_the_slo_and_the_key_load() -> None:
    text = render_report(report_of(records()), "text")
    head = text.splitlines()
    assert head[0].endswith("; 2 mixed, 1 failed — best: tuned +40.0% at c=4")
    assert "Loads: max-concurrency 1, 4, 16 and 64 · SLO: p99_ttft_ms ≤ 1000 ms" in head
    eagle = row_of(text, "eagle3")
    assert "± mixed 130 tok/s (+30.0%) at c=1" in eagle[0]
    assert eagle[0].endswith("improved up to max-concurrency 4, regressed from 16")
    assert eagle[1].strip() == ("c=1 improved +30.0% · c=4 improved +12.0% · "
                                "c=16 regressed -10.0% · c=64 regressed -30.0%")
    why = table(text)[0].index("Why")
    assert all(line.index("c=") == why for line in eagle[1:2])
    tuned = " ".join(row_of(text, "tuned"))
    assert "c=16 regressed +60.0% (p99_ttft_ms 1420 ms > 1000 ms)" in tuned
    assert "c=1 unchanged +1.0%" in tuned
    base = row_of(text, "baseline")
    assert base[1].strip().startswith("c=1 100 tok/s · c=4 100 tok/s")
    assert base[1].strip().endswith("SLO met at every level")
    # a failure at every level is said once, by the result's own why
    assert len(row_of(text, "oom")) == 1
    assert "Key achievement: tuned 140 tok/s (+40.0%) at max-concurrency 4" in text


def test_without_loads_the_summary_has_none_of_it() -> None:
    plain = [make_record("baseline", samples=[80.0, 81.0]),
             make_record("eagle3", samples=[90.0, 91.0])]
    report = report_of(plain, Metric())
    assert "loads" not in report
    text = render_report(report, "text")
    assert "Loads:" not in text and "SLO" not in text and " at c=" not in text
    assert all(len(row_of(text, name)) == 1 for name in ("baseline", "eagle3"))
    # the same report with an explicit "no loads" reads exactly the same
    assert render_report({**report, "loads": None, "slo": {}}, "text") == text


def test_an_slo_without_loads_is_named_and_a_breach_is_the_why() -> None:
    recs = [make_record("baseline", samples=[100.0, 100.2]),
            make_record("fast", samples=[150.0, 150.2])]
    recs = [r.__class__(**{**r.__dict__, "metrics": {**r.metrics, "p99_ttft_ms": ttft}})
            for r, ttft in zip(recs, ([500.0, 510.0], [1400.0, 1420.0]), strict=True)]
    report = report_of(recs)
    text = render_report(report, "text")
    assert "SLO: p99_ttft_ms ≤ 1000 ms" in text and "Loads:" not in text
    fast = row_of(text, "fast")[0]
    assert "▼ regressed" in fast and "p99_ttft_ms 1410 ms > 1000 ms limit" in fast


def test_a_run_that_failed_at_a_higher_level_says_where() -> None:
    recs = [leveled("baseline", [100.0, 200.0, 300.0, 400.0]),
            leveled("dies", [130.0, 250.0, None, None], statuses=["ok", "ok", "failed", "skipped"],
                    status="failed", log_tail=f"x\n{OOM}\n")]
    text = render_report(report_of(recs, Metric()), "text")
    assert "Loads: max-concurrency 1, 4, 16 and 64 · no SLO" in text
    dies = row_of(text, "dies")
    assert "▲ improved 130 tok/s (+30.0%) at c=1" in dies[0]
    assert dies[0].endswith("improved at max-concurrency 1 and 4; failed at 16; not reached at 64")
    assert dies[1].strip() == ("c=1 improved +30.0% · c=4 improved +25.0% · "
                               "c=16 failed (out-of-memory) · c=64 not reached")
    assert row_of(text, "baseline")[1].strip() == (
        "c=1 100 tok/s · c=4 200 tok/s · c=16 300 tok/s · c=64 400 tok/s")


def hand_made(levels: int = 4, name: str = "eagle3") -> dict[str, Any]:
    """A report in DESIGN23's shape, by hand: a baseline that breaks the SLO at the top level,
    one result improved at the lowest levels and regressed above."""
    loads = [{"max-concurrency": 2 ** i} for i in range(levels)]
    half = levels // 2
    entries = [{"load": load, "verdict": "improved" if i < half else "regressed", "cause": None,
                "value": 120.0 - 10 * i, "delta_pct": 20.0 - 10 * i, "slo": "met",
                "why": f"level {i}", "figures": {"output_throughput": 120.0 - 10 * i}}
               for i, load in enumerate(loads)]
    base = [{"load": load, "value": 100.0, "status": "ok",
             "slo": "violated" if i == levels - 1 else "met",
             "figures": {"output_throughput": 100.0, "p99_ttft_ms": 1200.0 if i == levels - 1
                         else 400.0},
             "why": ""} for i, load in enumerate(loads)]
    cross = {"improved": loads[:half], "regressed": loads[half:],
             "text": f"improved up to max-concurrency {2 ** (half - 1)}, regressed from "
                     f"{2 ** half}"}
    return {
        "batch": "b-hand", "preset": "eagle3", "metric": "output_throughput",
        "lower_is_better": False, "min_effect_pct": 2.0,
        "baseline": {"approach": "baseline", "value": 100.0, "status": "ok", "samples": [100.0],
                     "by_load": base},
        "results": [{"approach": name, "verdict": "mixed", "cause": None, "value": 120.0,
                     "delta_pct": 20.0, "why": cross["text"], "vs_parent": None,
                     "break_even": None, "samples": [120.0], "by_load": entries,
                     "crossover": cross}],
        "key_achievement": {"approach": name, "value": 120.0, "delta_pct": 20.0,
                            "load": loads[0]},
        "root_cause": None, "next_steps": [], "counts": {"mixed": 1}, "fingerprint": {},
        "loads": {"knob": "max-concurrency", "levels": [load["max-concurrency"]
                                                        for load in loads]},
        "slo": {"p99_ttft_ms": 1000.0},
    }


def test_a_baseline_breaking_the_slo_says_so_at_that_level() -> None:
    text = render_report(hand_made(), "text")
    base = " ".join(row_of(text, "baseline"))
    assert "c=8 100 tok/s, SLO broken (p99_ttft_ms 1200 ms > 1000 ms)" in base
    assert "c=1 100 tok/s · c=2 100 tok/s · c=4 100 tok/s" in base
    assert base.endswith("SLO met at every level but max-concurrency 8")


def test_sixteen_levels_and_a_long_name_keep_the_table_aligned() -> None:
    name = "x" * 100
    text = render_report(hand_made(16, name), "text")
    lines = table(text)
    why = lines[0].index("Why")
    rows = row_of(text, "baseline")
    assert len(rows) > 2  # sixteen levels wrap
    start = next(i for i, line in enumerate(lines) if line == name)
    result = lines[start + 1:]
    assert result[0].startswith(" " * 8) and result[0][why - 2:why] == "  "
    for line in rows[1:] + result[1:]:
        assert line[:why].strip() == "" and line[why] != " "
        assert len(line) - why <= 100
    cells = " · ".join(line[why:] for line in result[1:]).split(" · ")
    assert len(cells) == 16 and cells[-1] == "c=32768 regressed -130.0%"


# --------------------------------------------------------------------------- Slack


def test_the_slack_summary_carries_the_levels_in_its_table_and_the_load_of_the_key() -> None:
    payload = summary_payload(report_of(records()))
    check_slack_limits(payload)
    assert "2 mixed, 1 failed" in payload["text"]
    contexts = [e["text"] for b in payload["blocks"] if b["type"] == "context"
                for e in b["elements"]]
    assert "Loads: max-concurrency 1, 4, 16 and 64 · SLO: p99_ttft_ms ≤ 1000 ms" in contexts
    rows = next(b for b in payload["blocks"] if b["type"] == "table")["rows"]
    cells = {r[0]["text"]: (r[1]["text"], r[2]["text"]) for r in rows[1:]}
    result, why = cells["eagle3"]
    assert result.startswith("± mixed")
    assert why.startswith("improved up to max-concurrency 4, regressed from 16 — c=1 improved")
    assert "c=16 regressed +60.0% (p99_ttft_ms 1420 ms > 1000 ms)" in cells["tuned"][1]
    assert "SLO met at every level" in cells["baseline"][1]
    sections = [b["text"]["text"] for b in payload["blocks"] if b["type"] == "section"]
    assert "*Key achievement:* tuned 140 tok/s (+40.0%) at max-concurrency 4" in sections


# --------------------------------------------------------------------------- compare


def side(batch: str, recs: list[RunRecord]) -> Side:
    return Side(batch=batch, preset="eagle3", when="2026-12-01 10:00", state="done",
                plan=make_plan(), records=tuple(recs), report=report_of(recs))


def test_compare_lists_each_levels_verdict_change() -> None:
    older = records("b-a")
    newer = [leveled("baseline", [100.0] * 4, ttft=TTFT),
             leveled("eagle3", [131.0, 125.0, 112.0, 71.0], ttft=TTFT),
             leveled("tuned", [101.0, 140.0, 160.0, 100.5], ttft=TTFT)]
    newer = [r.__class__(**{**r.__dict__, "batch": "b-b"}) for r in newer]
    data = compare_batches(side("b-a", older), side("b-b", newer))
    rows = {r["approach"]: r for r in data["approaches"]}
    assert data["loads"] == [{"max-concurrency": n} for n in (1, 4, 16, 64)]
    assert rows["eagle3"]["a"]["verdict"] == "mixed" and rows["eagle3"]["b"]["verdict"] == "mixed"
    at16 = rows["eagle3"]["levels"][2]
    assert (at16["a"]["verdict"], at16["b"]["verdict"]) == ("regressed", "improved")
    assert at16["change_pct"] == 24.4 and at16["direction"] == "better"
    # tuned's c=16 no longer breaks the SLO: regressed → improved, the same value
    assert [lv["b"]["verdict"] for lv in rows["tuned"]["levels"]] == [
        "unchanged", "improved", "improved", "unchanged"]
    text = views.compared(data)
    assert "Loads: max-concurrency 1, 4, 16 and 64 in both batches" in text
    assert "c=16 regressed → improved +24.4% ▲" in text
    assert "c=1 mixed" not in text and "c=1 improved +0.8%" in text
    assert "c=16 regressed → improved +0.0%" in text
    assert "c=1 100 → 100 +0.0%" in text  # the baseline's levels: its values
    assert "oom  " in text and "c=1 failed" not in text  # B did not run it: no levels
    assert data["moved"] == []  # the lowest level moved too little
    assert ("Moved beyond noise at a level: eagle3 at c=4 (+11.6%, better), eagle3 at c=16 "
            "(+24.4%, better)") in text
    slack = views.compared(data, "slack")
    assert "↳ c=1 improved +0.8% · c=4 improved +11.6% ▲ · c=16 regressed → improved" in slack


def test_compare_of_batches_with_different_levels_warns() -> None:
    plain = [make_record("baseline", samples=[100.0, 100.2], batch="b-a"),
             make_record("eagle3", samples=[130.0, 130.2], batch="b-a")]
    data = compare_batches(side("b-a", plain), side("b-b", records("b-b")))
    assert data["loads"] is None
    assert not any("levels" in r for r in data["approaches"])
    assert ("different load levels (one operating point vs max-concurrency 1, 4, 16 and 64): "
            "compared at each batch's lowest level only") in data["warnings"]


# --------------------------------------------------------------------------- digest


def test_the_digest_lists_a_mixed_result_as_a_win_up_to_its_crossover() -> None:
    report = report_of(records("b-1"))
    rows = [row("b-0", days_ago=3, results=[{
                "approach": "eagle3", "verdict": "inconclusive", "cause": None, "value": 95.0,
                "delta_pct": 1.0, "why": "noisy"}],
                steps=[{"rank": 1, "kind": "retry", "approach": "eagle3", "action": "again",
                        "why": "noisy", "effort": "low"}]),
            row("b-1", days_ago=1, results=[])]
    rows[1] = rows[1].__class__(**{**rows[1].__dict__, "report": report})
    digest = build_digest(rows, {}, now=NOW, days=7)
    wins = {w["approach"]: w for w in digest["wins"]}
    assert set(wins) == {"eagle3", "tuned"}
    assert wins["eagle3"]["verdict"] == "mixed"
    assert (wins["eagle3"]["delta_pct"], wins["eagle3"]["load"]) == (30.0, {"max-concurrency": 1})
    # tuned's +60% at 16 broke the SLO: its win is the +40% at 4
    assert (wins["tuned"]["delta_pct"], wins["tuned"]["load"]) == (40.0, {"max-concurrency": 4})
    # a mixed result answers the earlier inconclusive and its retry
    assert digest["inconclusive"] == []
    assert not any(s["kind"] == "retry" and s["approach"] == "eagle3"
                   for s in digest["next_steps"])
    assert digest["verdicts"] == {"mixed": 2, "inconclusive": 1, "failed": 1}
    # never a regression of its own: a mixed result is no judged delta
    assert digest["regressions"] == []
    text = render_text("digest", digest=digest)
    assert text.splitlines()[1] == (
        "2 batches: 2 done; results: 2 mixed, 1 inconclusive, 1 failed")
    assert ("± eagle3/eagle3 130 tok/s (+30.0%) at max-concurrency 1 in b-1: mixed, improved "
            "up to max-concurrency 4, regressed from 16") in text
    blocks = render_blocks("digest", fallback="digest", digest=digest)
    assert any("± eagle3/tuned 140 tok/s (+40.0%) at max-concurrency 4" in
               str(b.get("text", {}).get("text", "")) for b in blocks["blocks"])


# --------------------------------------------------------------------------- progress


def phase(name: str, approach: str = "eagle3", **fields: object) -> Event:
    return make_event("approach.phase", "b-1", approach=approach, index=2, of=3, phase=name,
                      **fields)


C4 = {"max-concurrency": 4}


def test_the_progress_line_names_the_level() -> None:
    level = phase("level", load=C4, level=2, levels=4)
    assert phase_text(level) == "level 2/4 max-concurrency 4"
    rep = phase("repetition", rep=1, reps=3, load=C4)
    assert phase_text(rep, level) == "level 2/4 max-concurrency 4 · rep 1/3"
    assert phase_text(rep) == "max-concurrency 4 · rep 1/3"  # without its level event
    assert phase_text(phase("repetition", rep=1, reps=3)) == "rep 1/3"  # no loads: as before
    stream = io.StringIO()
    bar = ProgressBar(stream)
    for event in (level, phase("warmup", reps=3, load=C4), rep,
                  phase("result", rep=1, reps=3, metric="output_throughput", value=112.0,
                        load=C4)):
        bar.on_event(event)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("2/3 eagle3: level 2/4 max-concurrency 4")
    assert lines[1].endswith("2/3 eagle3: level 2/4 max-concurrency 4 · warm-up (not a sample)")
    assert lines[2].endswith("2/3 eagle3: level 2/4 max-concurrency 4 · rep 1/3")
    assert lines[3].endswith("level 2/4 max-concurrency 4 · rep 1/3: 112 tok/s")


def finished(report: dict[str, Any], name: str) -> Event:
    result = next(r for r in report["results"] if r["approach"] == name)
    return make_event("approach.finished", "b-1", approach=name, index=2, of=3, status="ok",
                      verdict=result["verdict"], value=result["value"],
                      delta_pct=result["delta_pct"], cause=None, why=result["why"],
                      metric="output_throughput", by_load=result["by_load"])


def test_a_finished_approach_says_its_verdict_per_level() -> None:
    report = report_of(records())
    assert outcome_text(finished(report, "eagle3")) == (
        "mixed 130 tok/s (+30.0%) at c=1 · c=1 ▲ +30.0% · c=4 ▲ +12.0% · c=16 ▼ -10.0% · "
        "c=64 ▼ -30.0%")
    base = make_event("approach.finished", "b-1", approach="baseline", index=1, of=3,
                      status="ok", verdict=None, value=100.0, delta_pct=None, cause=None,
                      why="", metric="output_throughput",
                      by_load=copy.deepcopy(report["baseline"]["by_load"]))
    base["by_load"][3]["slo"] = "violated"
    assert outcome_text(base) == (
        "ok 100 tok/s at c=1 · c=1 100 · c=4 100 · c=16 100 · c=64 100 ✗SLO")


def test_the_thread_progress_message_keeps_each_levels_values() -> None:
    progress = ProgressMessage.of("b-1", ["eagle3"])
    c1 = {"max-concurrency": 1}
    for event in (
        phase("level", load=c1, level=1, levels=4),
        phase("repetition", rep=1, reps=2, load=c1),
        phase("result", rep=1, reps=2, metric="output_throughput", value=130.0, load=c1),
        phase("result", rep=2, reps=2, metric="output_throughput", value=131.0, load=c1),
        phase("level", load=C4, level=2, levels=4),
        phase("repetition", rep=1, reps=2, load=C4),
    ):
        assert progress.apply(event)
    text = progress.render().text
    assert ("eagle3: level 2/4 max-concurrency 4 · rep 1/2 · c=1: 130 tok/s, 131 tok/s"
            in text)
    assert progress.apply(finished(report_of(records()), "eagle3"))
    done = progress.render().text
    assert "± eagle3: mixed 130 tok/s (+30.0%) at c=1 · c=1 ▲ +30.0%" in done


# --------------------------------------------------------------------------- history


def test_history_counts_mixed_and_names_the_loads_of_the_best() -> None:
    stored = row("b-1", days_ago=1, results=[])
    stored = stored.__class__(**{**stored.__dict__, "report": report_of(records("b-1"))})
    text = views.history([_summary_line(stored)])
    assert text.splitlines()[1].endswith("done — 1 failed, 2 mixed; best tuned +40.0% at c=4")


def test_a_mixed_confirmation_is_confirmed_at_some_levels_only() -> None:
    report = hand_made()
    report["sweep"] = {"name": "eagle-topk", "search": "grid", "measured": 4, "points": 4,
                       "best": {"approach": "eagle-topk@k=4", "delta_pct": 25.0,
                                "vs_parent": None},
                       "confirmation": {"batch": "b-conf", "approach": "eagle-topk@k=4",
                                        "state": "done", "verdict": "mixed", "value": 120.0,
                                        "delta_pct": 20.0}}
    text = render_report(report, "text")
    assert ("confirmed at some load levels only: eagle-topk@k=4 was mixed in confirmation "
            "b-conf (improved at some levels, regressed at others: `show b-conf` has each)"
            ) in text
    assert "was noise" not in text
    stored = row("b-sweep", days_ago=1, results=[])
    stored = stored.__class__(**{**stored.__dict__, "report": report})
    assert "; sweep eagle-topk confirmed at some load levels only (mixed) in b-conf" in (
        views.history([_summary_line(stored)]))


def test_the_digest_counts_a_sweep_by_its_confirmation_never_its_points() -> None:
    rows = [row("b-sweep", days_ago=3, plan=sweep_plan(), results=[
                result("eagle3", "mixed", value=84.0, delta_pct=5.0),
                result(CHUNK_0, "improved", value=104.0, delta_pct=30.0),
                result(CHUNK_1, "regressed", value=70.0, delta_pct=-12.0)]),
            row("b-confirm", days_ago=2.9, results=[
                result(CHUNK_0, "mixed", value=86.4, delta_pct=8.0)])]
    digest = build_digest(rows, {}, now=NOW, days=7)
    assert digest["verdicts"] == {"mixed": 2}


def test_a_best_judged_mixed_next_time_is_named_with_its_crossover_not_a_plain_regression(
) -> None:
    earlier = row("b-0", days_ago=3, results=[
        result("eagle3", "improved", value=130.0, delta_pct=30.0),
        result("tuned", "improved", value=101.0, delta_pct=1.0)])
    later = row("b-1", days_ago=1, results=[])
    later = later.__class__(**{**later.__dict__, "report": report_of(records("b-1"))})
    digest = build_digest([earlier, later], {}, now=NOW, days=7)
    [moved] = digest["regressions"]
    assert (moved["approach"], moved["from"]["verdict"], moved["to"]["verdict"]) == (
        "eagle3", "improved", "mixed")
    assert moved["change_pp"] is None  # the lowest level's delta is no measure of the move
    assert moved["to"]["crossover"] == "improved up to max-concurrency 4, regressed from 16"
    text = render_text("digest", digest=digest)
    assert ("± eagle3 best: eagle3 +30.0% (improved) → mixed (improved up to max-concurrency 4, "
            "regressed from 16) output_throughput, each against its own batch's baseline, "
            "b-0 → b-1") in text
    assert "▼ eagle3 best" not in text
    blocks = render_blocks("digest", fallback="digest", digest=digest)
    assert any("± eagle3 best: eagle3 +30.0% (improved) → mixed" in
               str(b.get("text", {}).get("text", "")) for b in blocks["blocks"])
    # a later batch where it is mixed again names it no more
    again = row("b-2", days_ago=0.5, results=[])
    again = again.__class__(**{**again.__dict__, "report": report_of(records("b-2"))})
    assert len(build_digest([earlier, later, again], {}, now=NOW, days=7)["regressions"]) == 1


# --------------------------------------------------------------------------- the real engine


def test_the_sglang_engines_own_phases_read_as_levels_on_the_progress_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The phases the SGLang engine emits against its stand-in, through the worker's emitter,
    as the command line and the thread show them."""
    standin = make_standin(tmp_path, monkeypatch)
    config = standin.config("baseline", role="baseline")
    plan = with_loads(standin.plan(config), reps=1, loads={"max-concurrency": [1, 4]})
    events: list[Event] = []
    emit = phase_emitter(CallbackSink(events.append), "b-1", "baseline", 0, 1)
    ctx = dataclasses.replace(standin.ctx(plan, "baseline"), on_phase=emit)
    record = SGLangEngine().run(config, ctx)
    assert record.status == "ok", record.log_tail
    stream = io.StringIO()
    bar = ProgressBar(stream)
    chat = ProgressMessage.of("b-1", ["baseline"])
    for event in events:
        bar.on_event(event)
        chat.apply(event)
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert "1/1 baseline: level 1/2 max-concurrency 1" in lines
    assert "1/1 baseline: level 2/2 max-concurrency 4 · warm-up (not a sample)" in lines
    assert "1/1 baseline: level 2/2 max-concurrency 4 · rep 1/1" in lines
    assert any(re.fullmatch(r"1/1 baseline: level 2/2 max-concurrency 4 · rep 1/1: [\d.]+ tok/s",
                            line) for line in lines)
    shown = chat.render().text
    # the server stops after the last level: each level's values stay, lowest first
    assert re.search(r"▶ baseline: stopping · warm-up [\d.]+ tok/s \(not a sample\) · "
                     r"c=1: [\d.]+ tok/s; c=4: [\d.]+ tok/s$", shown.strip())
