"""The local engine's capacity search (issue 36): the shipped `cpu-capacity` preset through the
real `specbench run` finds each configuration's capacity, in one child per configuration that
asks jobs.core.capacity for each next concurrency; a run resumed after its worker died takes the
levels its checkpoint holds back into the child's search instead of serving them again.

Which configuration carries more is a timing against the preset's 25 ms median TTFT, so the test
holds the ordering the child's serving makes, not a figure: prompt lookup serves a wave's requests
one after another (batch size 1 in transformers), so its median TTFT at c requests is about c/2
whole requests, while plain decoding serves the wave as one batch (on two quiet cores: 2-3
requests against 19-29). A level's SLO is the mean of two runs' medians of a few hundred ms each,
so a host that starves the baseline's server for most of a run (the whole suite on two cores:
CI saw both carry the same) breaks a level the baseline holds on a quiet one; the verdict is then
held only to the rules: prompt lookup carries no more, and regressed whenever it carries less."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.core.capacity import MAX_LEVELS, capacity_of
from jobs.core.plans import BatchPlan, load_preset, resolve
from jobs.engines.base import RunContext
from jobs.engines.levels_run import Levels, checkpoint_path
from jobs.engines.local import child as local_child
from jobs.engines.local.engine import LocalEngine
from tests.bot.test_cpu_demo import demo
from tests.jobs.engines.test_local import _run


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_cpu_capacity_preset_finds_each_configurations_capacity(tmp_path: Path) -> None:
    report, progress = demo(tmp_path / "data", "cpu-capacity")
    base = report["baseline"]["capacity"]
    (lookup,) = report["results"]
    assert base["complete"] is True and base["value"] is not None
    found = lookup["capacity"]
    assert found["binding"] == "median_ttft_ms"
    assert found["value"] is None or found["value"] <= base["value"], (found, base)
    # Less is regressed by the rules: a step is one request here, and prompt lookup's few
    # requests lie far more than the 5% minimum effect below the baseline's.
    if found["value"] is None or found["value"] < base["value"]:
        assert found["verdict"] == "regressed", found
    else:  # the same capacity: only when the host broke the baseline's few-request levels
        assert found["verdict"] == "unchanged" and base["value"] <= 3, (found, base)
    assert found["why"].startswith(
        f"prompt-lookup carries {found['value']} concurrent request" if found["value"]
        else "prompt-lookup breaks the SLO even at max-concurrency 1"), found["why"]
    assert report["capacity"]["slo_caveats"] == []  # a median: no few-samples exception needed
    assert progress.count("launching") == 2  # one child per configuration, every level in it
    # each level a line of its own: the baseline held at 1 (it has a capacity), so it doubled
    assert "baseline: capacity level 2 max-concurrency 2" in progress
    assert f"baseline: capacity level {base['levels']} max-concurrency" in progress
    logs = tmp_path / "data" / "logs" / report["batch"]
    for name in ("baseline", "prompt-lookup"):
        header = (logs / f"{name}.log").read_text().splitlines()[0]
        assert "--capacity 1,32 --slo median_ttft_ms=25.0" in header


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECBENCH_DATA_DIR", str(tmp_path_factory.mktemp("capacity-data")))
        shared = LocalEngine()
        yield shared
        shared.close()


def _plan() -> BatchPlan:
    """cpu-capacity with a tiny bench, searching up to 4 requests: 1, 2, 4 when nothing
    breaks (a limit no pass comes near)."""
    full = resolve(load_preset("cpu-capacity"))
    return dataclasses.replace(full, reps=2, startup_s=60, bench_s=30,
                               bench={"num-prompts": 4, "input-len": 16, "output-len": 8},
                               capacity={"knob": "max-concurrency", "from": 1, "max": 4},
                               slo={"median_ttft_ms": 60_000.0})


def test_a_resumed_run_takes_the_checkpoints_levels_back_into_the_search(
        engine: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    with monkeypatch.context() as patch:  # a worker that died after the search: no record
        patch.setattr(Levels, "finish", lambda self: None)
        first = _run(engine, plan, 0, tmp_path)
    assert first.status == "ok", first.log_tail
    found = capacity_of(first)
    assert found is not None and [lv["load"]["max-concurrency"] for lv in found.levels] == [
        1, 2, 4]
    assert (found.value, found.binding, found.complete) == (4, None, True)
    saved = json.loads(checkpoint_path(tmp_path / "baseline.log").read_text())
    held = saved["levels"][:2]  # as if it had died during the third level
    Levels(plan.baseline, _ctx(plan, tmp_path)).save(held)
    phases: list[tuple[str, dict[str, Any]]] = []
    again = _run(engine, plan, 0, tmp_path, on_phase=lambda p, d: phases.append((p, d)))
    assert again.status == "ok", again.log_tail
    assert "--capacity-done 1:1,2:1" in again.log_tail.splitlines()[0]
    assert [d for p, d in phases if p == "level"] == [
        {"load": {"max-concurrency": 4}, "level": 3, "levels": MAX_LEVELS,
         "search": "capacity"}]
    resumed = capacity_of(again)
    assert resumed is not None
    assert list(resumed.levels[:2]) == [{**lv, "slo": "met", "broken": {}} for lv in held]
    assert resumed.levels[2]["load"] == {"max-concurrency": 4}
    assert (resumed.value, resumed.complete) == (4, True)
    assert again.metrics == held[0]["metrics"]  # the record's own: the first level's
    assert not checkpoint_path(tmp_path / "baseline.log").exists()


def _ctx(plan: BatchPlan, tmp_path: Path) -> RunContext:
    return RunContext(batch_id="b-test", plan=plan, log_path=tmp_path / "baseline.log",
                      fingerprint={}, on_phase=lambda p, d: None, should_stop=lambda: False)


def test_the_child_searches_only_within_an_slo() -> None:
    with pytest.raises(SystemExit):
        local_child.parse_args(["--capacity", "1,8"])  # no --slo
    with pytest.raises(SystemExit):
        local_child.parse_args(["--capacity", "8,1", "--slo", "median_ttft_ms=10"])
    with pytest.raises(SystemExit):
        local_child.parse_args(["--capacity", "1,8", "--slo", "median_ttft_ms=10",
                                "--loads", "1,2"])
    args = local_child.parse_args(["--capacity", "1,8", "--slo", "median_ttft_ms=10",
                                   "--capacity-done", "1:1,2:0"])
    assert args.capacity == (1, 8) and args.slo == {"median_ttft_ms": 10.0}
    assert [(m.load, m.holds) for m in args.capacity_done] == [(1.0, True), (2.0, False)]


def test_a_request_rate_search_is_refused_before_any_run() -> None:
    plan = dataclasses.replace(_plan(), capacity={"knob": "request-rate", "from": 1, "max": 4})
    reasons = LocalEngine(fork=False).preflight(plan)
    assert set(reasons) == {"baseline", "prompt-lookup"}
    assert "no arrival rate" in reasons["baseline"] and "\n" not in reasons["baseline"]
    assert LocalEngine(fork=False).preflight(_plan()) == {}
