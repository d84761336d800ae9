"""A sweep batch end to end: its points run as the search proposes them, every record stored,
then the confirmation batch of the baseline and the winner decides (docs/contracts.md "Sweeps and
search").

The engine is a landscape: each configuration's throughput is a function of its two swept knobs,
plus seeded noise per repetition; everything else (store, execution, search, verdicts, report)
is the real code.
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.execution import execute_batch
from jobs.core.events import CallbackSink, Event
from jobs.core.messages import render_report
from jobs.core.plans import BatchPlan, RunConfig, parse_preset, resolve
from jobs.core.records import RunRecord
from jobs.core.units import with_unit
from jobs.engines.base import RunContext, now_iso, to_run_record
from jobs.store import Store
from tests.builders import needs

pytestmark = needs("optuna")

GRAPH = [64, 96, 128, 160, 192, 256, 384, 512]
MEM = [0.75, 0.8, 0.85, 0.88, 0.9]
PRESET = f"""\
name: tune
description: the article's knobs, searched
engine: local
reps: 1
min_effect_pct: 2.0
bracket: false  # the search and its confirmation are the subject here (tests/jobs/test_noise*)
baseline:
  server_args: {{model-path: /m, cuda-graph-max-bs: 512, mem-fraction-static: 0.85}}
approaches: []
sweep:
  name: tune
  grid:
    cuda-graph-max-bs: {GRAPH}
    mem-fraction-static: {MEM}
  search: adaptive
  budget: 12
  confirm_reps: 5
"""


class Landscape:
    """An engine whose value is `shape(i, j)` for the knobs' indices, times (1 + noise)."""

    name = "local"

    def __init__(self, shape: Callable[[int, int], float], *, noise: float = 0.0,
                 crash_after: int | None = None) -> None:
        self.shape, self.noise, self.crash_after = shape, noise, crash_after
        self.runs: list[str] = []
        self.reps = 0

    def preflight(self, plan: BatchPlan) -> dict[str, str]:
        return {}

    def fingerprint(self) -> dict[str, Any]:
        return {"gpu": "landscape"}

    def run(self, config: RunConfig, ctx: RunContext) -> RunRecord:
        if self.crash_after is not None and len(self.runs) >= self.crash_after:
            raise KeyboardInterrupt("the worker is killed")  # nothing of this run is stored
        self.runs.append(config.approach)
        i = GRAPH.index(config.server_args["cuda-graph-max-bs"])
        j = MEM.index(config.server_args["mem-fraction-static"])
        samples: list[float] = []
        for rep in range(ctx.plan.reps):
            # Seeded by the sweep batch (a confirmation's own id is random), so tests repeat.
            which = f"{ctx.plan.confirms}:confirm" if ctx.plan.confirms else ctx.batch_id
            rng = random.Random(zlib.crc32(f"{which}:{config.approach}:{rep}".encode()))
            samples.append(self.shape(i, j) * (1 + rng.gauss(0, self.noise)))
            self.reps += 1
            if rep + 1 < ctx.plan.reps and ctx.stop_early and ctx.stop_early(samples):
                break  # as the SGLang engine does
        return to_run_record(config, ctx, status="ok", started_at=now_iso(),
                             metrics={"output_throughput": samples})


def bump(peak: tuple[int, int], height: float = 20.0) -> Callable[[int, int], float]:
    def shape(i: int, j: int) -> float:
        return 80.0 + height * math.exp(-((i - peak[0]) ** 2 / 8 + (j - peak[1]) ** 2 / 3))

    return shape


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'sweeps.db'}")
    store.migrate()
    return store


def start(store: Store, text: str = PRESET, *, batch: str = "b-sweep001") -> str:
    """A stored batch of the preset; its id fixed, so that its noise and search are too."""
    plan = resolve(parse_preset(text, source="tune.yaml", stem="tune"))
    row, _ = store.create_batch(batch_id=batch, preset=plan.preset, engine=plan.engine,
                                queue=plan.queue, requested_by="U1", plan=plan)
    return row.id


def run(store: Store, batch: str, engine: Landscape) -> tuple[dict[str, Any], list[Event]]:
    events: list[Event] = []
    report = execute_batch(batch, store=store, sink=CallbackSink(events.append), engine=engine)
    return report, events


def test_an_adaptive_sweep_finds_the_optimum_and_the_confirmation_gives_the_true_margin(
    store: Store,
) -> None:
    shape = bump((2, 1))  # cuda-graph-max-bs 128, mem-fraction-static 0.8: the article's win
    engine = Landscape(shape, noise=0.01)
    batch = start(store)
    report, events = run(store, batch, engine)
    sweep = report["sweep"]
    assert (sweep["name"], sweep["search"], sweep["points"], sweep["measured"]) == (
        "tune", "adaptive", 40, 12)
    winner = "tune@cuda-graph-max-bs=128,mem-fraction-static=0.8"
    assert sweep["best"]["approach"] == winner
    confirmation = sweep["confirmation"]
    assert confirmation["verdict"] == "improved" and confirmation["approach"] == winner
    true_margin = (shape(2, 1) / shape(7, 2) - 1) * 100
    # Within the noise of two medians of 5 repetitions at 1 % each (about 0.8 % sd): 3 sd.
    assert confirmation["delta_pct"] == pytest.approx(true_margin, abs=2.5)
    assert report["key_achievement"]["approach"] == winner
    assert report["key_achievement"]["delta_pct"] == confirmation["delta_pct"]
    # 13 servers for the sweep (the baseline and 12 points), then 2 for the confirmation.
    assert len(engine.runs) == 15 and len(set(engine.runs[:13])) == 13
    assert engine.runs[13:] == ["baseline", winner]
    confirm = store.get_batch(confirmation["batch"])
    assert confirm is not None and confirm.state == "done" and confirm.plan.confirms == batch
    records = store.records(confirm.id)
    assert [(r.approach, len(r.samples("output_throughput"))) for r in records] == [
        ("baseline", 5), (winner, 5)]
    assert store.get_batch(batch).report["sweep"]["confirmation"] == confirmation  # type: ignore[union-attr]
    started = next(e for e in events if e["type"] == "batch.started" and e["batch"] == batch)
    assert started["sweep"] == {"name": "tune", "search": "adaptive", "points": 40,
                                "max_servers": 12}
    ofs = {e["of"] for e in events if e["type"] == "approach.finished" and e["batch"] == batch}
    assert ofs == {13}  # "point 5 of at most 12", after the baseline
    [adopt] = [s for s in report["next_steps"] if s["kind"] == "adopt"]
    assert adopt["approach"] == winner
    assert "(cuda-graph-max-bs=128, mem-fraction-static=0.8)" in adopt["action"]
    assert f"confirmed by batch {confirm.id}" in adopt["why"]
    # The accept step shows the confirmed value, the key achievement's, not the sweep's draw.
    accept = report["next_steps"][-1]
    assert accept["kind"] == "accept" and accept["approach"] == winner
    confirmed = with_unit(f"{confirmation['value']:.4g}", "output_throughput")
    assert f"{winner} ({confirmed} in its confirmation)" in accept["action"]
    text = render_report(report, "text")
    assert text.splitlines()[1].startswith(
        f"Sweep tune (adaptive, 12 of 40 points measured): confirmed: "
        f"{confirmation['delta_pct']:+.1f}%")
    blocks = json.dumps(render_report(report, "slack"))
    assert "confirmed: " in blocks


def test_on_a_flat_noisy_landscape_the_best_point_is_not_confirmed(store: Store) -> None:
    engine = Landscape(lambda i, j: 100.0, noise=0.03)
    batch = start(store)
    report, _ = run(store, batch, engine)
    sweep = report["sweep"]
    assert sweep["best"]["delta_pct"] > 2.0  # the winner's curse: the best of 12 noisy draws
    confirmation = sweep["confirmation"]
    assert confirmation is not None and confirmation["verdict"] != "improved", confirmation
    assert report["key_achievement"] is None
    assert not [s for s in report["next_steps"] if s["kind"] == "adopt"]
    [accept] = [s for s in report["next_steps"] if s["kind"] == "accept"]
    assert accept["approach"] == "baseline" and "did not hold up" in accept["why"]
    line = render_report(report, "text").splitlines()[1]
    assert f"not confirmed: the best point's {sweep['best']['delta_pct']:+.1f}% was noise" in line


def test_a_grid_sweep_runs_every_point_but_the_baseline_one(store: Store) -> None:
    text = PRESET.replace("search: adaptive", "search: grid").replace("  budget: 12\n", "")
    engine = Landscape(bump((5, 3)))
    report, _ = run(store, start(store, text), engine)
    assert report["sweep"]["measured"] == 39 and len(engine.runs) == 40 + 2
    assert report["sweep"]["best"]["approach"] == (
        "tune@cuda-graph-max-bs=256,mem-fraction-static=0.88")
    assert report["sweep"]["confirmation"]["verdict"] == "improved"


def test_a_sweep_where_nothing_beats_the_baseline_runs_no_confirmation(store: Store) -> None:
    engine = Landscape(bump((7, 2)))  # the baseline is the optimum
    report, _ = run(store, start(store), engine)
    assert report["sweep"]["best"]["approach"] == (
        "tune@cuda-graph-max-bs=512,mem-fraction-static=0.85")  # the baseline itself
    assert report["sweep"]["confirmation"] is None
    assert len(store.list_batches()) == 1


def test_a_sweep_killed_midway_resumes_without_running_a_point_twice(store: Store) -> None:
    shape = bump((2, 1))
    batch = start(store)
    first = Landscape(shape, noise=0.01, crash_after=7)
    with pytest.raises(KeyboardInterrupt):
        run(store, batch, first)
    assert len(store.records(batch)) == 7
    second = Landscape(shape, noise=0.01)
    report, _ = run(store, batch, second)
    assert not set(first.runs) & set(second.runs[:-2])  # the last two: the confirmation
    assert second.runs[-2:] == ["baseline", "tune@cuda-graph-max-bs=128,mem-fraction-static=0.8"]
    assert len(first.runs) + len(second.runs) == 13 + 2
    assert report["sweep"]["measured"] == 12
    resumed = store.records(batch)
    assert len({r.approach for r in resumed}) == len(resumed) == 13
    assert report["sweep"]["confirmation"]["verdict"] == "improved"
    # The same points, in the same order, as the same batch never interrupted: the search
    # resumed from the stored results, it did not start over.
    clean = Store(str(store.url).replace("sweeps.db", "clean.db"))
    clean.migrate()
    row = store.get_batch(batch)
    assert row is not None
    clean.create_batch(batch_id=batch, preset="tune", engine="local", queue=row.queue,
                       requested_by="U1", plan=row.plan)
    run(clean, batch, Landscape(shape, noise=0.01))
    assert [r.approach for r in clean.records(batch)] == [r.approach for r in resumed]


def test_a_confirmation_batch_taken_up_alone_is_left_to_its_sweep(store: Store) -> None:
    shape = bump((2, 1))
    batch = start(store)
    crashing = Landscape(shape, noise=0.01, crash_after=14)  # the confirmation's winner run
    with pytest.raises(KeyboardInterrupt):
        run(store, batch, crashing)
    [confirm] = [r for r in store.list_batches() if r.plan.confirms == batch]
    assert run(store, confirm.id, Landscape(shape))[0] == {}  # a recovery sweep's attempt
    assert len(store.records(confirm.id)) == 1
    again = Landscape(shape, noise=0.01)
    report, _ = run(store, batch, again)
    assert again.runs == ["tune@cuda-graph-max-bs=128,mem-fraction-static=0.8"]
    assert report["sweep"]["confirmation"]["batch"] == confirm.id
    assert len(store.records(confirm.id)) == 2


def test_a_point_that_cannot_beat_the_best_stops_its_repetitions(store: Store) -> None:
    engine = Landscape(bump((2, 1)), noise=0.01)
    report, _ = run(store, start(store, PRESET.replace("reps: 1", "reps: 3")), engine)
    records = store.records("b-sweep001")
    counts = {r.approach: len(r.samples("output_throughput")) for r in records}
    stopped = [n for n, c in counts.items() if c == 2]
    assert stopped, counts  # two of three worse than the best: the median cannot beat it
    assert all(c in (2, 3) for c in counts.values())
    assert engine.reps < 15 * 3  # 13 sweep servers and 2 confirmation runs, fewer repetitions
    assert report["sweep"]["best"]["approach"] == (
        "tune@cuda-graph-max-bs=128,mem-fraction-static=0.8")
    assert report["sweep"]["confirmation"]["verdict"] == "improved"


PARENT = """\
name: tune
description: a sweep around an approach
engine: local
reps: 1
min_effect_pct: 2.0
baseline:
  server_args: {{model-path: /m, cuda-graph-max-bs: 512, mem-fraction-static: 0.85}}
approaches:
  - name: parent
    hypothesis: where the sweep starts
    server_args: {{cuda-graph-max-bs: {graph}, mem-fraction-static: 0.8}}
sweep:
  name: tune
  extends: parent
  grid:
    cuda-graph-max-bs: [96, 160, 192]
  search: grid
  confirm_reps: 2
"""


@pytest.mark.parametrize(("graph", "better"), [(128, False), (64, True)])
def test_a_sweep_says_whether_it_beat_the_approach_it_extends(
    store: Store, graph: int, better: bool,
) -> None:
    engine = Landscape(bump((2, 1)))  # the peak: cuda-graph-max-bs 128, mem 0.8
    report, _ = run(store, start(store, PARENT.format(graph=graph)), engine)
    best = report["sweep"]["best"]
    parent = next(r for r in report["results"] if r["approach"] == "parent")
    vs = best["vs_parent"]
    assert (vs["approach"], vs["value"], vs["better"]) == ("parent", parent["value"], better)
    assert vs["delta_pct"] == round((best["value"] / parent["value"] - 1) * 100, 1)
    assert (vs["delta_pct"] > 2.0) is better
    text = render_report(report, "text").splitlines()[2]
    if better:
        assert text.startswith(f"{vs['delta_pct']:+.1f}% over parent (")
    else:  # the parent is the peak: every point is worse than where the sweep started
        assert text.startswith("The sweep found nothing better than the approach it started "
                               f"from: its best point {best['approach']}")
        assert f"is {vs['delta_pct']:+.1f}% against parent" in text
