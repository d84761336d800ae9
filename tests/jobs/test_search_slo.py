"""Search under an SLO (docs/contracts.md "Load levels and service-level objectives", issue 23 item
4): a sweep over a preset with `loads` and `slo` maximises its value among the points that met the
SLO at every level; a point that breaks it is never the best, the winner, nor the bar a repetition
must beat; the adaptive search hands the SLO to Optuna as a constraint (the value it is told is the
point's own); the confirmation runs at every level, under the same SLO.

The engine is a landscape with load levels: each configuration's throughput and p99 TTFT at each
level are functions of its swept knobs; everything else (store, execution, search, verdicts,
report) is the real code.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.batches.execution import execute_batch
from jobs.batches.sweeping import confirmation_plan, winner
from jobs.core.events import CallbackSink, Event
from jobs.core.levels import NO_FEASIBLE, Points, point_value, slo_breaches, slo_excess
from jobs.core.messages import render_report
from jobs.core.plans import BatchPlan, RunConfig, parse_preset, resolve
from jobs.core.records import RunRecord
from jobs.engines.base import RunContext, now_iso, to_run_record
from jobs.search import propose
from jobs.search.propose import EXCESS_ATTR, study_of
from jobs.store import Store
from tests.builders import needs
from tests.conftest import REPO, make_record
from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

pytestmark = needs("optuna")

GRAPH = [64, 96, 128, 160, 192, 256, 384, 512]
MEM = [0.75, 0.8, 0.85, 0.88, 0.9]
LIMIT = 1000.0


def preset(*, search: str = "grid", loads: str = "{max-concurrency: [1, 8]}",
           graph: list[int] | None = None, reps: int = 1) -> str:
    budget = "  budget: 12\n" if search == "adaptive" else ""
    graph_values = GRAPH if graph is None else graph
    return f"""\
name: tune
description: a sweep under an SLO
engine: local
reps: {reps}
min_effect_pct: 2.0
loads: {loads}
slo: {{p99_ttft_ms: {LIMIT:g}}}
allow_few_samples: true
baseline:
  server_args: {{model-path: /m, cuda-graph-max-bs: {graph_values[0]}, mem-fraction-static: 0.75}}
approaches: []
sweep:
  name: tune
  grid:
    cuda-graph-max-bs: {graph_values}
    mem-fraction-static: {MEM}
  search: {search}
{budget}  confirm_reps: 3
"""


Shape = Callable[[int, int, int], tuple[float, float]]  # (i, j, concurrency) -> (tok/s, ttft)


def rising(i: int, j: int, load: int) -> tuple[float, float]:
    """More throughput the larger both knobs, at every level; TTFT at 8 concurrent requests
    grows with the first knob and breaks the limit from its sixth value (256) on."""
    throughput = (100.0 + 10.0 * i + 4.0 * j) * (3.0 if load > 1 else 1.0)
    ttft = 300.0 + (150.0 * i if load > 1 else 10.0 * i)
    return throughput, ttft


class LoadLandscape:
    """An engine that measures `shape` at every level of the plan (one level without loads),
    writing by_load as the served engines do, and stopping repetitions as they do."""

    name = "local"

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.runs: list[tuple[str, str | None, dict[str, Any] | None, dict[str, float], int]] = []
        self.reps: dict[str, int] = {}

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def fingerprint(self) -> dict[str, Any]:
        return {"gpu": "landscape"}

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        plan = ctx.plan
        self.runs.append((config.approach, plan.confirms, plan.loads, dict(plan.slo), plan.reps))
        i = GRAPH.index(config.server_args["cuda-graph-max-bs"])
        j = MEM.index(config.server_args["mem-fraction-static"])
        levels: list[dict[str, Any]] = []
        for load in plan.levels:
            throughput, ttft = self.shape(i, j, int(load.get("max-concurrency", 1)))
            samples: list[float] = []
            for rep in range(plan.reps):
                samples.append(throughput)
                if (rep + 1 < plan.reps and plan.loads is None and ctx.stop_early
                        and ctx.stop_early(samples)):
                    break
            self.reps[config.approach] = len(samples)
            levels.append({"load": load, "status": "ok",
                           "metrics": {"output_throughput": samples,
                                       "p99_ttft_ms": [ttft] * len(samples)}})
        record = to_run_record(config, ctx, status="ok", started_at=now_iso(),
                               metrics=dict(levels[0]["metrics"]))
        if plan.loads is None:
            return record
        return dataclasses.replace(record, extra={**record.extra, "by_load": levels})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'slo.db'}")
    store.migrate()
    return store


def sweep(store: Store, text: str, engine: LoadLandscape, *, batch: str = "b-slo00001"
          ) -> dict[str, Any]:
    plan = resolve(parse_preset(text, source="tune.yaml", stem="tune"))
    store.create_batch(batch_id=batch, preset=plan.preset, engine=plan.engine, queue=plan.queue,
                       requested_by="U1", plan=plan)
    events: list[Event] = []
    return execute_batch(batch, store=store, sink=CallbackSink(events.append), engine=engine)


def index_of(name: str) -> tuple[int, int]:
    knobs = dict(part.split("=") for part in name.split("@", 1)[1].split(","))
    graph, mem = int(knobs["cuda-graph-max-bs"]), float(knobs["mem-fraction-static"])
    return GRAPH.index(graph), MEM.index(mem)


# --------------------------------------------------------------------------- the check itself


def leveled(ttft: list[float], *, status: list[str] | None = None,
            throughput: list[float] | None = None) -> RunRecord:
    levels = [{"load": {"max-concurrency": c}, "status": (status or ["ok"] * 3)[n],
               "metrics": {"output_throughput": [(throughput or [100.0] * 3)[n]] * 3,
                           "p99_ttft_ms": [ttft[n]] * 3}}
              for n, c in enumerate((1, 4, 16))]
    return make_record("tuned", samples=[100.0] * 3, extra={"by_load": levels})


def test_a_run_meets_the_slo_only_when_every_level_measured_within_it() -> None:
    slo = {"p99_ttft_ms": LIMIT}
    met = leveled([400.0, 700.0, 900.0])
    assert slo_breaches(met, slo) == []
    assert slo_excess(met, slo) == pytest.approx(-0.1)  # 900 / 1000 - 1: the closest call
    broken = leveled([400.0, 1420.0, 900.0])
    (breach,) = slo_breaches(broken, slo)
    assert (breach.load, breach.key, breach.median) == ({"max-concurrency": 4}, "p99_ttft_ms",
                                                        1420.0)
    assert breach.text == "p99_ttft_ms 1420 ms > 1000 ms at max-concurrency 4"
    assert slo_excess(broken, slo) == pytest.approx(0.42)
    unreached = leveled([400.0, 700.0, 0.0], status=["ok", "ok", "skipped"])
    assert [b.text for b in slo_breaches(unreached, slo)] == [
        "p99_ttft_ms not measured at max-concurrency 16"]
    assert slo_excess(unreached, slo) is None
    plain = make_record("plain", samples=[100.0], extra={})  # no loads: one level, its own
    assert slo_excess(plain, slo) is None  # no p99_ttft_ms recorded: not measured


def test_with_levels_a_points_value_is_the_geometric_mean_over_them() -> None:
    record = leveled([1.0] * 3, throughput=[100.0, 400.0, 1600.0])
    assert point_value(record, "output_throughput") == pytest.approx(400.0)
    gone = leveled([1.0] * 3, throughput=[100.0, 400.0, 1600.0], status=["ok", "ok", "failed"])
    gone.extra["by_load"][2]["metrics"] = {}
    assert point_value(gone, "output_throughput") is None  # a level without a sample
    assert point_value(make_record("p", samples=[3.0, 1.0, 2.0]), "output_throughput") == 2.0


# --------------------------------------------------------------------------- whole sweeps


def test_a_grid_sweeps_best_unconstrained_point_breaks_the_slo_and_is_not_the_winner(
    store: Store,
) -> None:
    engine = LoadLandscape(rising)
    report = sweep(store, preset(graph=GRAPH[:4] + GRAPH[5:7]), engine)  # 64..160, 256, 384
    swept = report["sweep"]
    assert swept["measured"] == 6 * 5 - 1
    best, slo = swept["best"], swept["slo"]
    # 160 (index 3): TTFT 750 ms at c=8; 256 and 384 break the limit at c=8
    assert index_of(best["approach"]) == (3, 4)
    assert slo["excluded"]["approach"] == "tune@cuda-graph-max-bs=384,mem-fraction-static=0.9"
    assert slo["excluded"]["value"] > best["value"]
    assert slo["excluded"]["why"] == "p99_ttft_ms 1200 ms > 1000 ms at max-concurrency 8"
    assert slo["limits"] == {"p99_ttft_ms": LIMIT} and slo["why"] is None
    assert slo["feasible"] == 4 * 5 - 1  # the baseline-equal point is the baseline's
    assert swept["objective"] == "geometric mean of output_throughput over max-concurrency 1 and 8"
    base = (100.0 * 300.0) ** 0.5
    assert best["value"] == pytest.approx((((100 + 46) * (100 + 46) * 3)) ** 0.5)
    assert best["delta_pct"] == pytest.approx(round(100 * (best["value"] / base - 1), 1))
    confirmation = swept["confirmation"]
    assert confirmation["approach"] == best["approach"]
    assert confirmation["verdict"] == "improved"
    # the confirmation ran the baseline and the winner at every level, under the SLO
    confirming = [run for run in engine.runs if run[1] == "b-slo00001"]
    assert [run[0] for run in confirming] == ["baseline", best["approach"]]
    assert all(run[2] == {"max-concurrency": [1, 8]} and run[3] == {"p99_ttft_ms": LIMIT}
               and run[4] == 3 for run in confirming)
    stored = store.records(confirmation["batch"])
    assert all(len(r.by_load) == 2 for r in stored)
    # the key achievement and the next steps are the confirmed winner's, not the fastest point's
    assert report["key_achievement"]["approach"] == best["approach"]
    assert report["key_achievement"]["load"] == {"max-concurrency": 1}  # the confirmation's value
    assert report["key_achievement"]["delta_pct"] == confirmation["delta_pct"]
    (step,) = [s for s in report["next_steps"] if s["kind"] == "accept"]
    assert step["approach"] == best["approach"] and "did not hold up" not in step["why"]
    assert step["why"].startswith(f"confirmed by batch {confirmation['batch']}")


def test_an_adaptive_sweep_maximises_among_points_within_the_slo(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    studies: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = study_of(*args, **kwargs)
        studies.append(found[0])
        return found

    monkeypatch.setattr(propose, "study_of", spy)
    engine = LoadLandscape(rising)
    report = sweep(store, preset(search="adaptive"), engine, batch="b-slo00002")
    # every proposal's model had each measured point's constraint: > 0 where it broke the SLO
    assert studies
    last = studies[-1].trials
    assert len(last) >= 11 and all(len(t.constraints) == 1 for t in last)
    assert {t.constraints["0"] > 0 for t in last} == {True, False}
    assert all((t.constraints["0"] > 0) == (t.params["cuda-graph-max-bs"] >= 5) for t in last)
    swept = report["sweep"]
    assert swept["measured"] == 12
    points = [run[0] for run in engine.runs if run[1] is None and "@" in run[0]]
    best = swept["best"]
    assert index_of(best["approach"])[0] <= 4  # TTFT within the limit at every level
    excluded = swept["slo"]["excluded"]
    assert excluded is not None and index_of(excluded["approach"])[0] >= 5
    assert excluded["value"] > best["value"]  # the search went past the limit, and knows it
    assert swept["confirmation"]["approach"] == best["approach"]
    # the winner is the best measured point within the SLO
    feasible = [p for p in points if index_of(p)[0] <= 4]
    values = {p: math.prod(rising(*index_of(p), c)[0] for c in (1, 8)) for p in feasible}
    assert best["approach"] == max(values, key=lambda p: values[p])


def test_a_sweep_without_a_point_within_the_slo_has_no_winner_and_says_why(
    store: Store,
) -> None:
    def slow(i: int, j: int, load: int) -> tuple[float, float]:
        throughput, ttft = rising(i, j, load)
        return throughput, ttft + 2000.0

    engine = LoadLandscape(slow)
    report = sweep(store, preset(graph=GRAPH[:2]), engine, batch="b-slo00003")
    swept = report["sweep"]
    assert swept["best"] is None and swept["confirmation"] is None
    assert swept["slo"]["why"] == NO_FEASIBLE and swept["slo"]["feasible"] == 0
    assert swept["slo"]["excluded"]["approach"] == \
        "tune@cuda-graph-max-bs=96,mem-fraction-static=0.9"
    assert not [run for run in engine.runs if run[1] is not None]  # no confirmation batch
    text = render_report(report, "text")  # the summary says why, and what broke the SLO
    assert NO_FEASIBLE in text and "(the fastest, tune@cuda-graph-max-bs=96," in text


def test_repetitions_stop_early_only_against_a_point_within_the_slo(store: Store) -> None:
    """No loads, an SLO, three repetitions: the first point measured is the fastest but breaks
    the SLO, so the next (slower, within it) runs all its repetitions; the one after, slower
    still, stops once it cannot beat that one."""

    def shape(i: int, j: int, load: int) -> tuple[float, float]:
        throughput = {0: 100.0, 1: 200.0, 2: 150.0, 3: 140.0}[i] + j
        return throughput, 1500.0 if i == 1 else 500.0

    engine = LoadLandscape(shape)
    text = preset(graph=GRAPH[:4], loads="null", reps=3).replace(
        "mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]", "mem-fraction-static: [0.75]")
    report = sweep(store, text, engine, batch="b-slo00004")
    name = "tune@cuda-graph-max-bs={},mem-fraction-static=0.75".format
    assert engine.reps[name(96)] == 3  # 200 beats 100, the best within the SLO
    assert engine.reps[name(128)] == 3  # 150 beats the baseline-equal point's 100
    assert engine.reps[name(160)] == 2  # 140 cannot beat 150, the best within the SLO
    assert report["sweep"]["best"]["approach"] == name(128)
    assert report["sweep"]["slo"]["excluded"]["approach"] == name(96)
    assert "objective" not in report["sweep"]


# --------------------------------------------------------------------------- Optuna's side


def test_optuna_is_given_the_slo_as_a_constraint_not_a_penalty() -> None:
    plan = resolve(parse_preset(preset(search="adaptive"), source="tune.yaml", stem="tune"))
    assert plan.sweep is not None
    name = "tune@cuda-graph-max-bs={},mem-fraction-static={}".format
    measured: dict[str, float | None] = {name(64, 0.8): 120.0, name(512, 0.9): 400.0,
                                         name(160, 0.85): 180.0, name(96, 0.75): None}
    excess: dict[str, float | None] = {name(64, 0.8): -0.5, name(512, 0.9): 0.8,
                                       name(160, 0.85): -0.1, name(96, 0.75): None}
    study, _, _ = study_of(plan.sweep, measured, lower_is_better=False, seed=1, excess=excess)
    trials = {tuple(t.params.values()): t for t in study.trials}
    fastest = trials[(7, 4)]
    assert fastest.value == 400.0  # its own value: no penalty
    assert fastest.user_attrs[EXCESS_ATTR] == 0.8
    assert fastest.constraints == {"0": 0.8}
    assert trials[(1, 0)].constraints == {"0": 1.0}  # unmeasured: at least twice the limit
    assert trials[(1, 0)].value == 120.0  # a failed point: the worst value measured
    assert study.best_trial.params == {"cuda-graph-max-bs": 3, "mem-fraction-static": 2}
    unconstrained, _, _ = study_of(plan.sweep, measured, lower_is_better=False, seed=1)
    assert unconstrained.best_trial.value == 400.0
    assert all(not t.constraints for t in unconstrained.trials)


def test_the_confirmation_plan_keeps_the_levels_and_the_slo() -> None:
    plan = resolve(parse_preset(preset(), source="tune.yaml", stem="tune"))
    assert plan.sweep is not None
    point = next(p.approach for p in (plan.sweep.points.at((2, 1)),))
    confirming = confirmation_plan(plan, point, sweep_batch="b-x")
    assert confirming.loads == {"max-concurrency": [1, 8]}
    assert confirming.slo == {"p99_ttft_ms": LIMIT}
    assert confirming.levels == [{"max-concurrency": 1}, {"max-concurrency": 8}]
    assert confirming.reps == 3 and confirming.sweep is None
    assert [c.approach for c in confirming.configs] == ["baseline", point]


def test_points_ignore_the_slo_without_one() -> None:
    plan = resolve(parse_preset(preset().replace("slo: {p99_ttft_ms: 1000}\n", ""),
                                source="tune.yaml", stem="tune"))
    assert plan.slo == {}
    records = [make_record("tune@cuda-graph-max-bs=96,mem-fraction-static=0.75",
                           samples=[150.0])]
    points = Points.of(plan, records)
    assert points.feasible(records[0].approach)
    assert points.best() == (records[0].approach, 150.0)


# --------------------------------------------------------------------------- the real CLI


def test_through_the_cli_the_fastest_point_breaks_the_slo_and_is_not_the_winner(
    tmp_path: Path,
) -> None:
    """`specbench run` of a sweep on the SGLang stand-in at two request rates: a longer time to
    the first token keeps more requests in flight at a given rate (Little's law, as the stand-in
    models it), so the slowest-to-start point serves the most tokens/s and breaks the TTFT limit
    at both levels; the winner is the best point within it, confirmed at both rates."""
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    bench = {k: v for k, v in TINY_BENCH.items() if k != "max-concurrency"}
    (config / "presets" / "slo-sweep.yaml").write_text(yaml.safe_dump({
        "name": "slo-sweep", "description": "the fastest point breaks the TTFT limit",
        "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 1,
        "warmup": False, "timeouts": {"startup_s": 20, "bench_s": 30}, "bench": bench,
        "loads": {"request-rate": [2, 8]}, "slo": {"p99_ttft_ms": 1000},
        "allow_few_samples": True,
        "baseline": {"server_args": SERVER_ARGS,
                     "env": {"STANDIN_STARTUP_S": "0.1", "STANDIN_TTFT_MS": "100"}},
        "approaches": [],
        # two repetitions each: one would be no noise estimate (docs/contracts.md "Noise,
        # measured"), and the confirmation would be inconclusive
        "sweep": {"name": "ttft", "grid": {"STANDIN_TTFT_MS": [100, 300, 900]},
                  "search": "grid", "confirm_reps": 2},
    }))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(tmp_path / "data"), USER="tester")
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "slo-sweep", "--format",
                           "json"], capture_output=True, text=True, env=env, timeout=240,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    swept = report["sweep"]
    assert swept["best"]["approach"] == "ttft@STANDIN_TTFT_MS=300"
    excluded = swept["slo"]["excluded"]
    assert excluded["approach"] == "ttft@STANDIN_TTFT_MS=900"
    assert excluded["value"] > swept["best"]["value"]
    assert excluded["why"].startswith("p99_ttft_ms ") and "at request-rate 2" in excluded["why"]
    confirmation = swept["confirmation"]
    assert confirmation["approach"] == "ttft@STANDIN_TTFT_MS=300"
    assert confirmation["verdict"] == "improved"
    shown = subprocess.run([sys.executable, "-m", "bot.cli.main", "show",
                            confirmation["batch"], "--format", "json"],
                           capture_output=True, text=True, env=env, timeout=60, cwd=REPO)
    confirmed = json.loads(shown.stdout)
    assert confirmed["loads"] == {"knob": "request-rate", "levels": [2, 8]}
    assert confirmed["slo"] == {"p99_ttft_ms": 1000.0}
    (winner,) = [r for r in confirmed["results"] if r["approach"] == confirmation["approach"]]
    assert [level["load"] for level in winner["by_load"]] == [{"request-rate": 2},
                                                              {"request-rate": 8}]


def test_a_point_within_the_slo_wins_over_a_baseline_that_breaks_it() -> None:
    """The per-level rules judge a level where only the baseline breaks the SLO `improved`: a
    slower point that meets the SLO is worth confirming; a faster one that breaks it is not."""
    plan = resolve(parse_preset(preset(), source="tune.yaml", stem="tune"))
    assert plan.sweep is not None
    name = "tune@cuda-graph-max-bs={},mem-fraction-static=0.75".format

    def run(approach: str, throughput: float, ttft: float, role: str = "approach") -> RunRecord:
        levels = [{"load": {"max-concurrency": c}, "status": "ok",
                   "metrics": {"output_throughput": [throughput * c] * 3,
                               "p99_ttft_ms": [ttft] * 3}} for c in (1, 8)]
        return make_record(approach, role=role, samples=[throughput] * 3,
                           extra={"by_load": levels})

    records = [run("baseline", 100.0, 1500.0, role="baseline"), run(name(96), 90.0, 800.0),
               run(name(128), 120.0, 1200.0)]
    points = Points.of(plan, records)
    assert not points.base_feasible and points.base_why.startswith("p99_ttft_ms 1500 ms")
    best = points.best()
    assert best is not None and best[0] == name(96)
    assert best[1] == pytest.approx(90.0 * 8 ** 0.5)
    assert winner(plan, points) == name(96)
    assert winner(plan, Points.of(plan, records[:1] + records[2:])) is None  # none within it


def test_with_levels_the_best_point_is_held_against_its_parent_taken_the_same_way(
    store: Store,
) -> None:
    text = preset(graph=GRAPH[:4]).replace("approaches: []", """\
approaches:
  - name: wide
    hypothesis: a larger memory fraction
    server_args: {mem-fraction-static: 0.9}""").replace("  name: tune\n  grid:", """\
  name: tune
  extends: wide
  grid:""").replace("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]\n", "")
    report = sweep(store, text, LoadLandscape(rising), batch="b-slo00005")
    best = report["sweep"]["best"]
    assert best["approach"] == "tune@cuda-graph-max-bs=160"
    parent = (100.0 + 16.0) * 3 ** 0.5  # wide: (0, 4), the geometric mean over c=1 and c=8
    assert best["vs_parent"]["value"] == pytest.approx(parent)
    assert best["vs_parent"]["delta_pct"] == pytest.approx(
        round(100 * (best["value"] / parent - 1), 1))
