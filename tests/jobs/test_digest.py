"""The weekly digest: pure data from batch rows and records, and its three renderings."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from jobs.commands.context import Caller, Context
from jobs.commands.digest import digest as digest_command
from jobs.core.digest import build_digest, experiment_best, hardware
from jobs.core.messages import render_blocks, render_text
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.sweeps import SweepPlan
from jobs.store import BatchRow, Store
from tests.conftest import make_plan, make_record

NOW = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)


def row(batch: str, *, days_ago: float, preset: str = "eagle3", state: str = "done",
        results: list[dict[str, Any]] | None = None,
        steps: list[dict[str, Any]] | None = None, plan: BatchPlan | None = None,
        baseline: float | None = 80.0) -> BatchRow:
    created = NOW - dt.timedelta(days=days_ago)
    report = None if results is None else {
        "batch": batch, "preset": preset, "results": results,
        "baseline": {"approach": "baseline", "value": baseline, "status": "ok"},
        "next_steps": steps or [{"rank": 1, "kind": "accept", "approach": "x", "action": "a",
                                 "why": "w", "effort": "low"}]}
    return BatchRow(
        id=batch, preset=preset, engine="sglang", queue="default", state=state,
        requested_by="U1", channel=None, thread_ts=None, host="gpu1",
        plan=plan or make_plan(), idempotency_key=None,
        cancel_requested=False, lease_owner=None, lease_expires_at=None, created_at=created,
        started_at=created, finished_at=created + dt.timedelta(minutes=5), report=report,
        error=None)


def rec(batch: str, approach: str, value: float, **kw: Any) -> RunRecord:
    return make_record(approach, samples=[value, value], batch=batch, preset="eagle3", **kw)


def result(approach: str, verdict: str, **kw: Any) -> dict[str, Any]:
    return {"approach": approach, "verdict": verdict, "cause": kw.get("cause"),
            "value": kw.get("value"), "delta_pct": kw.get("delta_pct"), "why": kw.get("why", "")}


def week() -> tuple[list[BatchRow], dict[str, list[RunRecord]]]:
    rows = [
        row("b-old", days_ago=20, results=[
            result("eagle3", "inconclusive", why="noisy", value=95.0, delta_pct=18.8),
            result("cg-64", "improved", value=84.0, delta_pct=5.0)]),
        row("b-1", days_ago=3, results=[
            result("cg-128", "improved", value=89.5, delta_pct=9.1),
            result("eagle3", "inconclusive", why="ranges overlap"),
            result("tree", "failed", cause="nccl-error"),
            result("symm", "failed", cause="arch-unsupported"),
        ]),
        row("b-2", days_ago=1, results=[
            result("eagle3", "regressed", value=54.1, delta_pct=-34.0),
            result("fusion", "failed", cause="arch-unsupported"),
            result("ep", "inconclusive", why="mem-fraction-static differs"),
            result("other-gpu", "inconclusive", value=120.0, delta_pct=48.1,
                   why="gpu differs"),
        ], steps=[
            {"rank": 1, "kind": "retry", "approach": "ep", "action": "rerun ep", "why": "confound",
             "effort": "low"},
            {"rank": 2, "kind": "accept", "approach": "cg-128", "action": "keep", "why": "best",
             "effort": "low"}]),
        row("b-run", days_ago=0.1, state="running"),
    ]
    records = {
        "b-old": [rec("b-old", "baseline", 80.0), rec("b-old", "eagle3", 95.0),
                  rec("b-old", "cg-64", 84.0)],
        "b-1": [rec("b-1", "baseline", 82.0), rec("b-1", "cg-128", 89.5),
                rec("b-1", "tree", 0.0, status="failed")],
        "b-2": [rec("b-2", "baseline", 81.0), rec("b-2", "eagle3", 54.1),
                rec("b-2", "other-gpu", 120.0, fingerprint={"gpu": "H200", "gpu_count": 1})],
    }
    return rows, records


def test_the_digest_sums_up_the_week() -> None:
    rows, records = week()
    digest = build_digest(rows, records, now=NOW, days=7)
    assert [b["batch"] for b in digest["batches"]] == ["b-1", "b-2", "b-run"]
    assert digest["counts"] == {"done": 2, "running": 1}
    best = {(b["preset"], b["hardware"]): b for b in digest["best"]}
    rtx = best[("eagle3", "8x NVIDIA RTX PRO 6000 Blackwell Server Edition")]
    # judged results only, as deltas: b-old's inconclusive +18.8% never counts
    assert (rtx["approach"], rtx["delta_pct"], rtx["batch"]) == ("cg-128", 9.1, "b-1")
    assert (rtx["value"], rtx["unit"], rtx["verdict"], rtx["new"]) == (
        89.5, "tok/s", "improved", True)
    assert {k: rtx["previous"][k] for k in ("approach", "batch", "delta_pct")} == {
        "approach": "cg-64", "batch": "b-old", "delta_pct": 5.0}
    assert rtx["change_pp"] == pytest.approx(4.1)
    # the H200 run was inconclusive (its fingerprint differs from the baseline's): not judged
    assert list(best) == [("eagle3", "8x NVIDIA RTX PRO 6000 Blackwell Server Edition")]
    assert [(w["approach"], w["delta_pct"]) for w in digest["wins"]] == [("cg-128", 9.1)]
    assert digest["failures"] == [
        {"cause": "arch-unsupported", "count": 2, "approaches": [
            {"approach": "eagle3/symm", "count": 1}, {"approach": "eagle3/fusion", "count": 1}]},
        {"cause": "nccl-error", "count": 1, "approaches": [{"approach": "eagle3/tree",
                                                            "count": 1}]},
    ]
    # eagle3 was inconclusive in b-1 but settled (regressed) in b-2: ep and other-gpu stay open.
    assert [(i["approach"], i["batch"]) for i in digest["inconclusive"]] == [
        ("ep", "b-2"), ("other-gpu", "b-2")]
    assert [(s["kind"], s["approach"], s["batch"]) for s in digest["next_steps"]] == [
        ("retry", "ep", "b-2")]


def test_an_empty_week_renders_in_every_format() -> None:
    digest = build_digest([], {}, now=NOW, days=7, tz="Europe/Paris")
    assert digest["period"]["to"] == "2026-12-07 10:00"
    text = render_text("digest", digest=digest)
    assert "0 batches" in text and "none judged yet" in text
    payload = render_blocks("digest", fallback=text, digest=digest)
    assert payload["blocks"][0]["type"] == "header"


def test_the_digest_renders_as_text_and_block_kit() -> None:
    rows, records = week()
    digest = build_digest(rows, records, now=NOW, days=7)
    text = render_text("digest", digest=digest)
    assert ("eagle3 on 8x NVIDIA RTX PRO 6000 Blackwell Server Edition: cg-128 +9.1% "
            "output_throughput vs its baseline (improved, 89.5 tok/s, batch b-1), +4.1 pp over "
            "the best before the period (was cg-64 +5.0% in b-old)") in text
    assert "▲ eagle3/cg-128 89.5 tok/s (+9.1%) in b-1" in text
    assert "arch-unsupported: 2 failures" in text and "nccl-error: 1 failure (" in text
    assert "eagle3: 1. [retry, low effort] rerun ep — confound (batch b-2)" in text
    payload = render_blocks("digest", fallback=text, digest=digest)
    assert len(payload["blocks"]) <= 50
    sections = " ".join(b["text"]["text"] for b in payload["blocks"] if b["type"] == "section")
    assert "cg-128" in sections and "ranges overlap" not in sections


def test_specbench_digest_reads_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    monkeypatch.setenv("SPECBENCH_DATABASE_URL", url)
    store = Store(url)
    created = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    store.create_batch(batch_id="b-1", preset="eagle3", engine="sglang", queue="default",
                       requested_by="U1", plan=make_plan(),
                       created_at=created)
    store.put_record(rec("b-1", "baseline", 82.0), position=0)
    store.set_state("b-1", "done")
    assert main(["digest", "--format", "json"]) == 0
    digest = json.loads(capsys.readouterr().out)
    assert digest["counts"] == {"done": 1} and digest["best"] == []  # no report: nothing judged
    assert main(["digest", "--format", "slack", "--days", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks"]
    assert main(["digest"]) == 0
    assert "1 batch: 1 done" in capsys.readouterr().out
    recent = digest_command(Context(store=store, caller=Caller("U1")), days=0.5, chart=False)
    assert recent.digest["batches"] == [] and recent.chart is None


# ------------------------------------------------------------------ issue 14: judged results only


def confounded_history() -> tuple[list[BatchRow], dict[str, list[RunRecord]]]:
    """Two batches on one host whose baselines differ (503 and 1048 tok/s): b-lo's cg-128 is
    the largest judged improvement; b-hi's tp run has the fastest median of all (3157) but was
    confounded (inconclusive), and its eagle3 improved less against a faster baseline."""
    rows = [
        row("b-lo", days_ago=3, baseline=503.0, results=[
            result("cg-128", "improved", value=600.0, delta_pct=19.3)]),
        row("b-hi", days_ago=2, baseline=1048.0, results=[
            result("eagle3", "improved", value=1100.0, delta_pct=5.0),
            result("tp", "inconclusive", value=3157.0, delta_pct=201.2,
                   why="tp-size differs from the baseline (8 vs 1)"),
            result("dead", "failed", cause="crash")]),
    ]
    records = {
        "b-lo": [rec("b-lo", "baseline", 503.0), rec("b-lo", "cg-128", 600.0)],
        "b-hi": [rec("b-hi", "baseline", 1048.0), rec("b-hi", "eagle3", 1100.0),
                 rec("b-hi", "tp", 3157.0), rec("b-hi", "dead", 0.0, status="failed")],
    }
    return rows, records


def test_the_best_is_the_largest_judged_delta_never_a_confounded_median() -> None:
    rows, records = confounded_history()
    digest = build_digest(rows, records, now=NOW, days=7)
    (best,) = digest["best"]
    assert (best["approach"], best["batch"], best["delta_pct"], best["value"]) == (
        "cg-128", "b-lo", 19.3, 600.0)
    assert best["previous"] is None and best["new"] is True and best["improvement"] is True
    text = render_text("digest", digest=digest)
    assert "cg-128 +19.3% output_throughput vs its baseline (improved, 600 tok/s" in text
    assert "3157" not in text.split("Wins:")[0]
    # the trend has the same yardstick: each day's largest judged delta
    (series,) = experiment_best(rows, records, now=NOW, days=7)
    assert [(p["day"], p["approach"], p["delta_pct"], p["verdict"]) for p in series["points"]] == [
        ("2026-12-04", "cg-128", 19.3, "improved"), ("2026-12-05", "eagle3", 5.0, "improved")]
    assert series["unit"] == "tok/s"


def test_no_improvement_judged_says_so_and_a_regressed_best_is_only_the_least_bad() -> None:
    rows = [row("b-1", days_ago=2, results=[
        result("a", "regressed", value=70.0, delta_pct=-12.5),
        result("b", "unchanged", value=79.5, delta_pct=-0.6),
        result("c", "inconclusive", value=99.0, delta_pct=23.8)])]
    records = {"b-1": [rec("b-1", "baseline", 80.0), rec("b-1", "a", 70.0),
                       rec("b-1", "b", 79.5), rec("b-1", "c", 99.0)]}
    digest = build_digest(rows, records, now=NOW, days=7)
    (best,) = digest["best"]
    assert (best["approach"], best["verdict"], best["improvement"]) == ("b", "unchanged", False)
    assert "no improvement judged; best b -0.6%" in render_text("digest", digest=digest)


CHUNK_0, CHUNK_1 = "chunk@chunked-prefill-size=0", "chunk@chunked-prefill-size=1"


def sweep_plan() -> BatchPlan:
    """A plan with a two-point sweep, its points CHUNK_0 and CHUNK_1 (made from the grid)."""
    sweep = SweepPlan(name="chunk", extends=None, grid={"chunked-prefill-size": [0, 1]},
                      search="grid", budget=None, confirm_reps=3)
    plan = make_plan(sweep=sweep)
    assert [c.approach for c in plan.points] == [CHUNK_0, CHUNK_1]
    return plan


def test_a_sweep_point_counts_only_through_its_confirmation() -> None:
    rows = [
        row("b-sweep", days_ago=3, plan=sweep_plan(), results=[
            result("eagle3", "improved", value=84.0, delta_pct=5.0),
            result(CHUNK_0, "improved", value=104.0, delta_pct=30.0),  # 1 rep, unconfirmed
            result(CHUNK_1, "unchanged", value=80.5, delta_pct=0.6)]),
        row("b-confirm", days_ago=2.9, results=[
            result(CHUNK_0, "improved", value=86.4, delta_pct=8.0)]),
    ]
    records = {"b-sweep": [rec("b-sweep", n, 80.0) for n in
                           ("baseline", "eagle3", CHUNK_0, CHUNK_1)],
               "b-confirm": [rec("b-confirm", "baseline", 80.0),
                             rec("b-confirm", CHUNK_0, 86.4)]}
    (best,) = build_digest(rows, records, now=NOW, days=7)["best"]
    assert (best["approach"], best["batch"], best["delta_pct"]) == (CHUNK_0, "b-confirm", 8.0)
    (series,) = experiment_best(rows, records, now=NOW, days=7)
    assert max(p["delta_pct"] for p in series["points"]) == 8.0
    # a confirmation that did not hold up leaves the sweep's other judged result the best
    rows[1] = row("b-confirm", days_ago=2.9, results=[
        result(CHUNK_0, "inconclusive", value=82.0, delta_pct=2.5)])
    (best,) = build_digest(rows, records, now=NOW, days=7)["best"]
    assert (best["approach"], best["delta_pct"]) == ("eagle3", 5.0)


def step(kind: str, approach: str | None, action: str = "do it") -> dict[str, Any]:
    return {"rank": 0, "kind": kind, "approach": approach, "action": action, "why": "w",
            "effort": "low"}


FULL_STEPS = [step("retry", "ep", "rerun ep alone"), step("adopt", "cg-128", "make cg-128"),
              step("remedy", "tree, symm", "use a driver with sm_120 kernels"),
              step("accept", "cg-128", "accept")]


def full_batch() -> BatchRow:
    return row("b-full", days_ago=3, steps=FULL_STEPS, results=[
        result("cg-128", "improved", value=89.5, delta_pct=9.1),
        result("ep", "inconclusive", why="noisy"),
        result("tree", "failed", cause="arch-unsupported"),
        result("symm", "failed", cause="arch-unsupported")])


def open_steps(rows: list[BatchRow]) -> list[tuple[str, str | None, str]]:
    digest = build_digest(rows, {}, now=NOW, days=7)
    return [(s["kind"], s["approach"], s["batch"]) for s in digest["next_steps"]]


def test_open_steps_survive_a_later_retry_of_two_configurations() -> None:
    retry = row("b-retry", days_ago=2, results=[result("ep", "improved", value=85.0,
                                                       delta_pct=6.2)],
                steps=[step("adopt", "ep", "make ep"), step("accept", "ep", "accept")])
    assert open_steps([full_batch(), retry]) == [
        ("adopt", "cg-128", "b-full"), ("adopt", "ep", "b-retry"),
        ("remedy", "tree, symm", "b-full")]  # ep's retry is settled, nothing else was run
    digest = build_digest([full_batch(), retry], {}, now=NOW, days=7)
    assert [s["rank"] for s in digest["next_steps"]] == [1, 2, 3]
    assert all(s["kind"] != "accept" for s in digest["next_steps"])


def test_a_later_batch_settles_what_it_ran() -> None:
    # ep inconclusive again: its newer retry replaces the old one; tree re-ran (still failing,
    # with its own remedy), symm did not: the remedy naming both stays until symm runs again
    again = row("b-2", days_ago=2, results=[
        result("ep", "inconclusive", why="still noisy"),
        result("tree", "failed", cause="nccl-error")],
        steps=[step("retry", "ep", "rerun ep with 5 reps"), step("remedy", "tree", "nccl fix")])
    assert open_steps([full_batch(), again]) == [
        ("retry", "ep", "b-2"), ("adopt", "cg-128", "b-full"),
        ("remedy", "tree, symm", "b-full"), ("remedy", "tree", "b-2")]
    failed = row("b-3", days_ago=1.5, results=[result("ep", "failed", cause="crash")])
    assert ("retry", "ep", "b-2") in open_steps([full_batch(), again, failed])  # no answer yet
    settled = row("b-4", days_ago=1, results=[
        result("ep", "unchanged", value=80.4, delta_pct=0.5),
        result("symm", "failed", cause="arch-unsupported"),
        result("cg-128", "improved", value=89.0, delta_pct=8.5)])
    assert open_steps([full_batch(), again, failed, settled]) == [("remedy", "tree", "b-2")]


def test_a_baseline_that_holds_the_adopted_change_settles_the_adopt() -> None:
    cg = {"cuda-graph-max-bs": 128}
    base = make_plan()
    full = row("b-full", days_ago=3, steps=[step("adopt", "cg-128", "make cg-128")],
               results=[result("cg-128", "improved", value=89.5, delta_pct=9.1)],
               plan=make_plan(configs=(base.baseline, RunConfig(
                   approach="cg-128", role="approach", parent=None, hypothesis="",
                   change={"server_args": cg, "env": {}},
                   server_args={**base.baseline.server_args, **cg}, env={}))))
    other = row("b-other", days_ago=2, results=[result("eagle3", "regressed", value=70.0,
                                                       delta_pct=-12.5)])
    assert open_steps([full, other]) == [("adopt", "cg-128", "b-full")]
    adopted = make_plan(configs=(dataclasses.replace(
        base.baseline, server_args={**base.baseline.server_args, **cg}), base.configs[1]))
    later = row("b-adopted", days_ago=1, plan=adopted, results=[
        result("eagle3", "improved", value=95.0, delta_pct=4.0)])
    assert open_steps([full, other, later]) == []


def test_a_cpu_host_is_named_by_its_cpu_and_one_batch_is_one_batch() -> None:
    cpu = {"gpu": "none (CPU: AMD EPYC 9654 96-Core Processor)", "gpu_count": 0,
           "cpu": "AMD EPYC 9654 96-Core Processor"}
    rows = [row("b-cpu", days_ago=1, results=[result("eagle3", "improved", value=12.0,
                                                     delta_pct=20.0)])]
    records = {"b-cpu": [rec("b-cpu", "baseline", 10.0, fingerprint=cpu),
                         rec("b-cpu", "eagle3", 12.0, fingerprint=cpu)]}
    digest = build_digest(rows, records, now=NOW, days=7)
    assert digest["best"][0]["hardware"] == "CPU (AMD EPYC 9654 96-Core Processor)"
    text = render_text("digest", digest=digest)
    assert "1 batch: 1 done" in text and "0x none" not in text and "Host: none" not in text
    assert "eagle3 on CPU (AMD EPYC 9654 96-Core Processor): eagle3 +20.0%" in text
    blocks = json.dumps(render_blocks("digest", fallback=text, digest=digest))
    assert "*1 batch*" in blocks and "0x none" not in blocks
    bare = {"gpu": "none", "gpu_count": 0}  # SGLang's probe on a host without a GPU
    assert hardware(make_record("a", fingerprint=bare)) == "CPU (model unknown)"


def test_the_digest_command_returns_the_trend_png_of_judged_deltas(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    created = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    ctx = Context(store=store, caller=Caller("U1"))
    store.create_batch(batch_id="b-1", preset="eagle3", engine="sglang", queue="default",
                       requested_by="U1", plan=make_plan(), created_at=created)
    store.put_records([(0, rec("b-1", "baseline", 82.0)), (1, rec("b-1", "eagle3", 90.0))])
    store.end("b-1", "done")  # ended without a report
    assert digest_command(ctx, days=7).chart is None  # nothing judged yet: no chart
    store.create_batch(batch_id="b-2", preset="eagle3", engine="sglang", queue="default",
                       requested_by="U1", plan=make_plan(), created_at=created)
    store.put_records([(0, rec("b-2", "baseline", 82.0)), (1, rec("b-2", "eagle3", 90.0))])
    store.end("b-2", "done", report={"batch": "b-2", "preset": "eagle3", "results": [
        result("eagle3", "improved", value=90.0, delta_pct=9.8)], "next_steps": []})
    out = digest_command(ctx, days=7)
    assert out.chart is not None and out.chart.startswith(b"\x89PNG")
    (best,) = out.digest["best"]
    assert (best["approach"], best["delta_pct"], best["unit"]) == ("eagle3", 9.8, "tok/s")
    store.close()
