"""Sweeps in presets and the search over them (docs/contracts.md "Sweeps and search"), on synthetic
landscapes: the search sees only what a worker would store, the median of each point it ran."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs.core.plans import BatchPlan, only, parse_preset, resolve, to_plan
from jobs.core.sweeps import point_name
from jobs.errors import KnobError, PresetError
from jobs.search import next_point, servers_used
from tests.builders import needs, specbench_here

pytestmark = needs("optuna")

GRAPH = [64, 96, 128, 160, 192, 256, 384, 512]
MEM = [0.75, 0.8, 0.85, 0.88, 0.9]
SWEPT = f"""\
name: tune
description: a two-knob sweep
engine: local
reps: 1
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
  confirm_reps: 3
"""


def plan_of(text: str = SWEPT) -> BatchPlan:
    return resolve(parse_preset(text, source="cfg/tune.yaml", stem="tune"))


Landscape = Callable[[int, int], float]


def smooth(peak: tuple[int, int], *, noise: float, seed: int) -> Landscape:
    rng = random.Random(seed)

    def value(i: int, j: int) -> float:
        bump = 40 * math.exp(-((i - peak[0]) ** 2 / 8 + (j - peak[1]) ** 2 / 3))
        return 80 + bump + rng.gauss(0, noise)

    return value


def search(plan: BatchPlan, landscape: Landscape, *, batch: str) -> dict[str, float | None]:
    """Run the sweep the way a worker does: propose, measure, store, until it says done."""
    assert plan.sweep is not None
    measured: dict[str, float | None] = {}
    base = plan.sweep.same_as_baseline
    if base is not None:
        measured[base] = landscape(*plan.sweep.point(base).index)  # the baseline's own run
    while (name := next_point(plan.sweep, measured, lower_is_better=False, batch=batch)):
        assert name not in measured, f"{name} proposed twice"
        measured[name] = landscape(*plan.sweep.point(name).index)
    return measured


def best_of(measured: dict[str, float | None]) -> str:
    return max((n for n, v in measured.items() if v is not None), key=lambda n: measured[n] or 0)


# --------------------------------------------------------------------------- presets


def test_points_are_named_and_declared_and_the_baseline_point_is_not_run_twice() -> None:
    plan = plan_of()
    assert plan.sweep is not None and len(plan.points) == 40 and plan.configs[1:] == ()
    first = plan.points[0]
    assert first.approach == "tune@cuda-graph-max-bs=64,mem-fraction-static=0.75"
    assert first.change["server_args"] == {"cuda-graph-max-bs": 64, "mem-fraction-static": 0.75}
    assert first.server_args["model-path"] == "/m"
    assert plan.sweep.same_as_baseline == point_name(
        "tune", {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.85})
    assert plan.sweep.max_servers == 12
    assert to_plan(plan.to_dict()) == plan  # a plan travels as JSON through store and broker


def test_a_sweep_extending_an_approach_inherits_it_and_sets_env_knobs() -> None:
    text = SWEPT.replace("approaches: []", """approaches:
  - name: eagle
    hypothesis: speculate
    server_args: {speculative-algorithm: EAGLE3}""").replace(
        "  name: tune\n  grid:",
        "  name: steps\n  extends: eagle\n  grid:\n    NCCL_ALGO: [Ring, Tree]",
    ).replace("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]\n", "").replace(
        "budget: 12", "budget: 4")
    plan = plan_of(text)
    point = plan.config("steps@NCCL_ALGO=Ring,cuda-graph-max-bs=64")
    assert point.parent == "eagle" and point.env["NCCL_ALGO"] == "Ring"
    assert point.server_args["speculative-algorithm"] == "EAGLE3"
    assert point.change == {"server_args": {"speculative-algorithm": "EAGLE3",
                                            "cuda-graph-max-bs": 64},
                            "env": {"NCCL_ALGO": "Ring"}}
    assert plan.sweep is not None and plan.sweep.same_as_baseline is None
    retried = only(plan, [point.approach])
    assert [c.approach for c in retried.configs] == ["baseline", point.approach]
    assert retried.sweep is None


@pytest.mark.parametrize(("change", "message"), [
    (("grid:\n    cuda-graph-max-bs: [64, 96, 128, 160, 192, 256, 384, 512]\n"
      "    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]", "grid: {}"), "grid is empty"),
    (("mem-fraction-static: [0.75", "mem-fraction-static: [0.75, 0.75"), "repeats 0.75"),
    (("    mem-fraction-static:", "    Mem Fraction:"), "neither a server flag"),
    (("budget: 12", "budget: 41"), "larger than the grid (40 points)"),
    (("budget: 12", "budget: 0"), "budget"),
    (("  budget: 12\n", ""), "adaptive needs a budget"),
    (("search: adaptive", "search: grid"), "applies to search: adaptive"),
    (("search: adaptive", "search: bayes"), "search"),
    (("  name: tune\n  grid", "  name: tune\n  extends: nope\n  grid"), "names no approach 'nope'"),
    (("confirm_reps: 3", "confirm_reps: 0"), "confirm_reps"),
    (("confirm_reps: 3", "confirm_reps: 3\n  trials: 5"), "unknown key 'sweep.trials'"),
    (("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]", "    mem-fraction-static: []"),
     "has no values"),
])
def test_a_malformed_sweep_is_one_line_naming_the_key_and_line(
    change: tuple[str, str], message: str
) -> None:
    text = SWEPT.replace(*change)
    assert text != SWEPT
    with pytest.raises(PresetError) as info:
        plan_of(text)
    error = str(info.value)
    assert message in error and "\n" not in error, error
    assert error.startswith("cfg/tune.yaml:"), error
    assert error.split(":")[1].isdigit(), f"no line in {error!r}"


def test_no_approaches_and_no_sweep_is_refused() -> None:
    text = SWEPT.split("sweep:")[0]
    with pytest.raises(PresetError, match="at least one approach, or a sweep"):
        plan_of(text)


def test_a_swept_knob_cannot_be_set() -> None:
    preset = parse_preset(SWEPT.replace("reps: 1", "reps: 1\noverridable: [cuda-graph-max-bs]"),
                          source="cfg/tune.yaml", stem="tune")
    with pytest.raises(KnobError, match="swept"):
        resolve(preset, overrides={"cuda-graph-max-bs": 128})


# --------------------------------------------------------------------------- the search


def test_grid_runs_every_point_once_in_order_but_the_baseline_point() -> None:
    plan = plan_of(SWEPT.replace("search: adaptive", "search: grid").replace("  budget: 12\n", ""))
    assert plan.sweep is not None
    measured = search(plan, smooth((3, 2), noise=0.0, seed=0), batch="b-grid")
    assert list(measured)[1:] == [p.approach for p in plan.points
                                  if p.approach != plan.sweep.same_as_baseline]
    assert servers_used(plan.sweep, measured) == 39


@pytest.mark.slow
@pytest.mark.parametrize(("peak", "batch"), [  # peaks inside and at each edge, both seeds
    ((2, 1), "b-0001"), ((5, 3), "b-0002"), ((0, 4), "b-0001"), ((7, 0), "b-0002")])
def test_adaptive_finds_a_smooth_optimum_with_12_of_40_servers(
    peak: tuple[int, int], batch: str
) -> None:
    plan = plan_of()
    assert plan.sweep is not None
    landscape = smooth(peak, noise=0.5, seed=len(batch))
    measured = search(plan, landscape, batch=batch)
    assert servers_used(plan.sweep, measured) == 12
    assert plan.sweep.point(best_of(measured)).index == peak, sorted(
        (plan.sweep.point(n).index, round(v or 0, 1)) for n, v in measured.items())


def test_adaptive_steers_away_from_points_that_fail() -> None:
    plan = plan_of()
    assert plan.sweep is not None
    base = smooth((6, 4), noise=0.0, seed=0)

    def landscape(i: int, j: int) -> float:
        return base(i, j)

    measured: dict[str, float | None] = {}
    while (name := next_point(plan.sweep, measured, lower_is_better=False, batch="b-oom")):
        i, j = plan.sweep.point(name).index
        measured[name] = None if j == 4 and i < 3 else landscape(i, j)  # out of memory
    assert len(measured) == 12 and len(set(measured)) == 12
    assert any(v is not None for v in measured.values())


@pytest.mark.parametrize("change", [
    ("budget: 12", "budget: 99"), ("search: adaptive", "search: random"),
    ("    mem-fraction-static: [0.75, 0.8, 0.85, 0.88, 0.9]", "    mem-fraction-static: []"),
])
def test_a_malformed_sweep_from_the_cli_exits_2_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str]
) -> None:
    """`specbench run FILE` through the console script's entry, in this process (tests/builders.py
    `specbench_here`): the refusal is the CLI's own, with no process of its own to start."""
    preset = tmp_path / "tune.yaml"
    preset.write_text(SWEPT.replace(*change))
    done = specbench_here(capsys, "run", str(preset), drop=("SPECBENCH_BROKER_URL",),
                          env={"SPECBENCH_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{preset}:" in lines[0] and "Traceback" not in done.stderr
    database = tmp_path / "data" / "specbench.db"
    if database.exists():
        from jobs.store import Store

        assert Store(f"sqlite:///{database}").list_batches() == []


def test_retry_rejoins_the_names_of_points_split_at_their_commas() -> None:
    from jobs.commands.retry import rejoin

    known = ["a", "tune@x=1,y=2", "tune@x=1,y=3"]
    assert rejoin(["a", "tune@x=1", "y=2", "tune@x=1", "y=3"], known) == [
        "a", "tune@x=1,y=2", "tune@x=1,y=3"]
    assert rejoin(["tune@x=1", "nope"], known) == ["tune@x=1", "nope"]  # unknown: as typed
