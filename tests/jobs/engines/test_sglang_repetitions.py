"""Every repetition is a measurement of its own (docs/contracts.md "Real SGLang"), on the
stand-in."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, judge
from jobs.engines.sglang.engine import SGLangEngine, bench_args
from tests.standin.harness import Standin, make_standin

SPECULATIVE = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/d"}


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def test_bench_args_give_each_repetition_its_seed_and_a_flush() -> None:
    bench = {"dataset-name": "random-ids", "num-prompts": 64}
    assert bench_args(bench, rep=1) == {**bench, "seed": 1, "flush-cache": True}
    assert bench_args(bench, rep=3)["seed"] == 3
    assert bench_args({**bench, "seed": 40}, rep=2)["seed"] == 41
    assert bench_args({**bench, "--seed": 40}, rep=1) == {**bench, "seed": 40,
                                                          "flush-cache": True}


def test_repetitions_get_distinct_seeds_a_flushed_cache_and_their_own_accept_length(
    standin: Standin,
) -> None:
    config = standin.config("eagle3", server_args=SPECULATIVE)
    plan = standin.plan(config, reps=3)
    plan = dataclasses.replace(plan, bench={**plan.bench, "random-output-len": 64})
    record = SGLangEngine().run(config, standin.ctx(plan, "eagle3"))
    assert record.status == "ok"
    reps = record.extra["repetitions"]
    assert [r["seed"] for r in reps] == [1, 2, 3]
    assert all(r["sample"] and r["completed"] == r["sent"] == 2 for r in reps)
    assert record.extra["warmup"]["seed"] == 4  # after the repetitions': none replays it
    log = standin.root / "logs" / "eagle3.log"
    # before repetitions 1 to 3 (after specbench's warm-up) by specbench, after each of its own
    # one-request warm-ups by bench_serving
    assert log.read_text().count("Cache flushed successfully!") == 3 + 4
    bench_log = (standin.root / "logs" / "eagle3.bench.log").read_text()
    assert bench_log.count("flush_cache=True") == 4
    per_rep = [r["accept_length"] for r in reps]
    assert len(set(per_rep)) > 1, "different prompts, different accept lengths"
    assert record.metrics["accept_length"] == pytest.approx(sum(per_rep) / 3)
    standin.assert_clean()


def test_a_repetition_with_failed_requests_is_no_sample(standin: Standin) -> None:
    # request 3 of each repetition (after the warm-up and one prompt) fails
    config = standin.config("flaky", env={"STANDIN_FAIL_EVERY": "3"})
    baseline = standin.config("baseline", role="baseline")
    plan = standin.plan(baseline, config, reps=2)
    engine = SGLangEngine()
    base = engine.run(baseline, standin.ctx(plan, "baseline"))
    record = engine.run(config, standin.ctx(plan, "flaky"))
    assert record.status == "ok"
    assert record.metrics["output_throughput"] == []
    assert [r["why"] for r in record.extra["repetitions"]] == ["completed 1 of 2"] * 2
    assert "specbench: repetition 1 is no sample: bench_serving completed 1 of 2 prompts" in (
        record.log_tail)
    verdict = judge(record, base, metric=Metric(), rules=load_rules())
    assert verdict.verdict == "failed"
    assert "completed 1 of 2" in verdict.why
    standin.assert_clean()


def test_a_renamed_knob_runs_under_the_release_s_name_and_the_record_keeps_it(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_VERSION", "0.5.23")
    config = standin.config("baseline", role="baseline")  # cuda-graph-max-bs: 8
    plan = standin.plan(config)
    engine = SGLangEngine()
    assert engine.preflight(plan) == {}
    record = engine.run(config, standin.ctx(plan, "baseline"))
    assert record.status == "ok", record.log_tail
    assert record.server_args["cuda-graph-max-bs-decode"] == 8
    assert "cuda-graph-max-bs" not in record.server_args
    assert "cuda_graph_max_bs_decode=8" in record.log_tail
    standin.assert_clean()


def test_a_server_that_falls_back_from_the_change_makes_it_inconclusive(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_VERSION", "0.5.23")  # warns and carries on, on SM120
    args = {"tp-size": 8, "disable-custom-all-reduce": True}
    baseline = standin.config("baseline", role="baseline", server_args=args)
    symm = dataclasses.replace(
        standin.config("symm-mem", server_args={**args, "enable-torch-symm-mem": True}),
        change={"server_args": {"enable-torch-symm-mem": True}, "env": {}},
    )
    plan = standin.plan(baseline, symm)
    engine = SGLangEngine()
    assert engine.preflight(plan) == {}
    base = engine.run(baseline, standin.ctx(plan, "baseline"))
    record = engine.run(symm, standin.ctx(plan, "symm-mem"))
    assert base.status == record.status == "ok"
    assert "fallbacks" not in base.extra
    [line] = record.extra["fallbacks"]  # eight ranks, one line
    assert line.endswith("TorchSymmMemCommunicator: Device capability 12 not supported, "
                         "communicator is not available.")
    verdict = judge(record, base, metric=Metric(), rules=load_rules())
    assert verdict.verdict == "inconclusive" and verdict.reason == "fallback"
    assert "TorchSymmMemCommunicator: Device capability 12 not supported" in verdict.why
    standin.assert_clean()


def test_stop_early_ends_the_repetitions_and_says_so(standin: Standin) -> None:
    """A sweep's point that can no longer beat the best: no more bench_serving runs."""
    config = standin.config("point")
    plan = standin.plan(config, reps=3)
    seen: list[list[float]] = []

    def stop(samples: list[float]) -> bool:
        seen.append(list(samples))
        return True

    ctx = dataclasses.replace(standin.ctx(plan, "point"), stop_early=stop)
    record = SGLangEngine().run(config, ctx)
    assert record.status == "ok"
    assert len(record.samples("output_throughput")) == 1 and len(seen) == 1
    assert record.extra["stopped_early"] == 1
    assert "stopped after repetition 1 of 3" in record.log_tail
    assert len(standin.notes("bench")) == 2  # the warm-up and repetition 1
    assert record.extra["warmup"] is not None
    standin.assert_clean()


def bench_runs(standin: Standin, approach: str) -> list[dict[str, str]]:
    """The seed and output file of every bench_serving run, from the arguments it logged."""
    text = (standin.root / "logs" / f"{approach}.bench.log").read_text()
    found = re.findall(r"output_file='([^']*)'.*?seed=(\d+)", text)
    return [{"output_file": path, "seed": seed} for path, seed in found]


def test_the_warm_up_is_one_more_bench_run_recorded_but_no_sample(standin: Standin) -> None:
    """reps + 1 bench_serving runs, each with its seed and a fresh file; the first is the
    warm-up, kept in the record's `warmup`, and the samples are the repetitions' alone."""
    config = standin.config("baseline", role="baseline", env={"STANDIN_THROUGHPUT": "82.0"})
    plan = standin.plan(config, reps=3)
    phases: list[tuple[str, dict[str, Any]]] = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok", record.log_tail
    runs = bench_runs(standin, "baseline")
    assert len(runs) == len(standin.notes("bench")) == 3 + 1
    assert [r["seed"] for r in runs] == ["4", "1", "2", "3"]
    assert len({r["output_file"] for r in runs}) == 4
    assert ".warmup." in runs[0]["output_file"]
    warmup = record.extra["warmup"]
    assert warmup["output_throughput"] == 82.0 and warmup["completed"] == warmup["sent"] == 2
    assert set(warmup) >= {"total_throughput", "median_ttft_ms", "median_itl_ms", "seed"}
    assert record.metrics["output_throughput"] == [82.0] * 3
    assert [r["rep"] for r in record.extra["repetitions"]] == [1, 2, 3]
    assert [name for name, _ in phases][2:4] == ["warmup", "result"]
    assert json.loads(record.to_json())["warmup"] == warmup  # the stored line keeps it
    standin.assert_clean()


def test_warmup_false_runs_no_warm_up(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline")
    plan = dataclasses.replace(standin.plan(config, reps=2), warmup=False)
    phases: list[tuple[str, dict[str, Any]]] = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok", record.log_tail
    assert [r["seed"] for r in bench_runs(standin, "baseline")] == ["1", "2"]
    assert record.extra["warmup"] is None
    assert "warmup" not in [name for name, _ in phases]
    log = (standin.root / "logs" / "baseline.log").read_text()
    assert log.count("Cache flushed successfully!") == 1 + 2  # before rep 2; bench_serving's
    standin.assert_clean()


def test_a_server_that_dies_in_the_warm_up_fails_the_configuration(standin: Standin) -> None:
    config = standin.config("fatal-bench", "fatal-in-bench")
    plan = standin.plan(config, reps=2, bench_s=60)
    record = SGLangEngine().run(config, standin.ctx(plan, "fatal-bench"))
    assert record.status == "failed"
    assert record.metrics["output_throughput"] == [] and "repetitions" not in record.extra
    assert len(standin.notes("bench")) == 1
    standin.assert_clean()
