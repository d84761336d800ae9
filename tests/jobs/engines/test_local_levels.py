"""The local engine at load levels (issue 23 item 6): one child per configuration serves every
level of `loads: {max-concurrency: [...]}`; plain greedy decoding batches a level's requests,
assisted and prompt-lookup decoding serve them one at a time (batch size 1 in transformers).

Batching is checked by what the child did, not by timing: each level records the largest
batch one generate() call served, and the child's log counts its generate() calls per pass."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.core.plans import BatchPlan, load_preset, resolve
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.engines.levels_run import Levels, checkpoint_path
from jobs.engines.local import child as local_child
from jobs.engines.local import model as local_model
from jobs.engines.local.engine import LocalEngine
from jobs.engines.local.serving import LATENCY_KEYS, Bench
from tests.jobs.engines.test_local import _run  # one way to run a configuration

BENCH = {"num-prompts": 4, "input-len": 64, "output-len": 32}
FIGURES = {"output_throughput", "total_throughput", *LATENCY_KEYS}


@pytest.fixture(autouse=True)
def _one_data_dir(monkeypatch: pytest.MonkeyPatch, local_data_dir: Path) -> None:
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(local_data_dir))


@pytest.fixture(scope="session")
def engine(local_engine: LocalEngine) -> LocalEngine:
    """The engine test_local shares (tests/jobs/engines/conftest.py): one warm fork server."""
    return local_engine


@pytest.fixture(scope="module")
def runs(engine: LocalEngine, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The baseline and prompt lookup of cpu-loads at max-concurrency 1 and 2, as a batch runs
    them (the approach checked against the baseline's output), with their phases."""
    tmp = tmp_path_factory.mktemp("levels")
    plan = _plan([1, 2])
    started = engine.launcher.forked + engine.launcher.fresh
    phases: dict[str, list[tuple[str, dict[str, Any]]]] = {"baseline": [], "prompt-lookup": []}
    base = _run(engine, plan, 0, tmp, on_phase=lambda p, d: phases["baseline"].append((p, d)))
    lookup = _run(engine, plan, 1, tmp, baseline=base,
                  on_phase=lambda p, d: phases["prompt-lookup"].append((p, d)))
    children = engine.launcher.forked + engine.launcher.fresh - started
    return {"plan": plan, "base": base, "lookup": lookup, "phases": phases,
            "children": children, "tmp": tmp}


def test_one_child_per_configuration_serves_every_level(runs: dict[str, Any]) -> None:
    assert runs["children"] == 2
    for name in ("base", "lookup"):
        record: RunRecord = runs[name]
        assert record.status == "ok", record.log_tail
        levels = json.loads(record.to_json())["by_load"]
        assert [level["load"] for level in levels] == [{"max-concurrency": 1},
                                                        {"max-concurrency": 2}]
        for level in levels:
            assert level["status"] == "ok"
            assert FIGURES <= set(level["metrics"])
            assert all(len(level["metrics"][k]) == 2 for k in FIGURES)  # per repetition
            assert level["warmup"]["completed"] == 4
            for ttft, e2e, tpot in zip(level["metrics"]["median_ttft_ms"],
                                       level["metrics"]["median_e2e_latency_ms"],
                                       level["metrics"]["median_tpot_ms"], strict=True):
                assert 0 < ttft < e2e and tpot > 0
        # The record's own figures are the lowest level's.
        assert {k: record.metrics[k] for k in FIGURES} == {
            k: levels[0]["metrics"][k] for k in FIGURES}
    assert runs["lookup"].extra["output_digest"] == runs["base"].extra["output_digest"]
    assert "--loads [1, 2]" in runs["base"].log_tail.splitlines()[0]


def test_each_level_is_a_phase_and_its_phases_carry_the_load(runs: dict[str, Any]) -> None:
    phases = runs["phases"]["baseline"]
    levels = [d for p, d in phases if p == "level"]
    assert levels == [{"load": {"max-concurrency": 1}, "level": 1, "levels": 2},
                      {"load": {"max-concurrency": 2}, "level": 2, "levels": 2}]
    second = [p for p, _ in phases].index("level", 5)
    assert [p for p, _ in phases[second:]] == [
        "level", "warmup", "result", "repetition", "result", "repetition", "result", "stopping"]
    assert all(d.get("load") == {"max-concurrency": 2} for _, d in phases[second:-1])


def test_plain_decoding_batches_while_speculation_is_served_alone(
    runs: dict[str, Any],
) -> None:
    base, lookup = runs["base"].by_load, runs["lookup"].by_load
    assert [level["batch_size"] for level in base] == [1, 2]
    assert [level["batch_size"] for level in lookup] == [1, 1]
    # The child's own count: 4 requests are 2 generate() calls at 2, 4 when served alone.
    assert re.search(r"rep 1/2 at max-concurrency 2: 128 tokens .* 2 generate\(\) calls",
                     runs["base"].log_tail)
    assert re.search(r"rep 1/2 at max-concurrency 2: 128 tokens .* 4 generate\(\) calls",
                     runs["lookup"].log_tail)
    # What batching gains in throughput is a timing, and a busy machine decides it: `make bench`
    # measures it; the test holds what the child did (the batch sizes and call counts above).
    assert lookup[0]["metrics"]["accept_length"] > 1.5


@pytest.fixture
def same_environment() -> Iterator[None]:
    """torch sets TORCHINDUCTOR_CACHE_DIR in os.environ when this process first imports it: a
    later run would then need a fork server of its own (another environment)."""
    before = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(before)


@pytest.mark.usefixtures("same_environment")
def test_batched_greedy_output_is_each_prompt_own() -> None:
    args = local_child.parse_args(["--num-prompts", "5", "--input-len", "64",
                                   "--output-len", "24", "--threads", "1"])
    target = local_model.build_target(args)
    prompts = local_model.make_prompts(args, target)
    bench = Bench(args, target)
    alone = bench.serve(prompts, 1)
    batched = bench.serve(prompts, 3)  # a wave of 3, then one of 2
    assert batched.outputs == alone.outputs
    assert (alone.batch_sizes, batched.batch_sizes) == ([1] * 5, [3, 2])
    assert len(alone.ttft_s) == len(batched.e2e_s) == 5
    lookup = Bench(local_child.parse_args([*_argv(args), "--prompt-lookup-num-tokens", "10"]),
                   target)
    served = lookup.serve(prompts, 3)
    assert served.outputs == alone.outputs and served.batch_sizes == [1] * 5
    # In a wave served one at a time, each request waits for the ones before it.
    assert served.ttft_s[0] < served.ttft_s[1] < served.ttft_s[2]
    with pytest.raises(ValueError, match="one request at a time"):
        lookup.generate_batch(prompts[:2])


def test_an_output_that_differs_from_the_baseline_fails_every_level(
    engine: LocalEngine, runs: dict[str, Any]
) -> None:
    plan: BatchPlan = runs["plan"]
    forged = dataclasses.replace(runs["base"], extra={
        "output_digest": "0" * 64, "prompt_digests": ["0" * 12] * 4})
    record = _run(engine, plan, 1, runs["tmp"], baseline=forged)
    assert record.status == "failed" and record.exit_code == 1
    assert [level["status"] for level in record.by_load] == ["failed", "failed"]
    assert "LosslessnessError: greedy output differs from the baseline's at prompt 0" in (
        record.log_tail)


def test_a_cancel_at_a_level_cancels_it_and_the_levels_after(
    engine: LocalEngine, runs: dict[str, Any]
) -> None:
    # Passes long enough (~0.4 s) that the engine, which looks for a stop between events, sees
    # it while level 2 runs.
    plan = dataclasses.replace(_plan([1, 2, 4]), warmup=False,
                               bench={**BENCH, "output-len": 128})
    seen: list[int] = []
    record = _run(engine, plan, 0, runs["tmp"],
                  on_phase=lambda p, d: seen.append(d["level"]) if p == "level" else None,
                  should_stop=lambda: 2 in seen)
    assert record.status == "cancelled"
    assert [level["status"] for level in record.by_load] == ["ok", "cancelled", "cancelled"]
    assert len(record.by_load[0]["metrics"]["output_throughput"]) == plan.reps
    assert record.by_load[2]["metrics"]["output_throughput"] == []


def test_a_run_resumed_after_its_worker_died_starts_at_the_level_it_reached(
    engine: LocalEngine, runs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies during level 3 leaves the checkpoint of levels 1 and 2 (the last
    level is never in one: its record follows), as this run does when the record that deletes
    the checkpoint is kept from doing so; the batch's resume runs the configuration again, and
    the child serves level 3 only."""
    plan = _plan([1, 2, 4])
    tmp = runs["tmp"] / "resume"
    with monkeypatch.context() as patch:
        patch.setattr(Levels, "finish", lambda self: None)
        first = _run(engine, plan, 0, tmp)
    assert first.status == "ok", first.log_tail
    checkpoint = json.loads(checkpoint_path(tmp / "baseline.log").read_text())
    assert [level["load"] for level in checkpoint["levels"]] == [{"max-concurrency": 1},
                                                                 {"max-concurrency": 2}]
    phases: list[tuple[str, dict[str, Any]]] = []
    again = _run(engine, plan, 0, tmp, on_phase=lambda p, d: phases.append((p, d)))
    assert again.status == "ok", again.log_tail
    assert "--loads [4] " in again.log_tail.splitlines()[0] + " "
    assert [d for p, d in phases if p == "level"] == [
        {"load": {"max-concurrency": 4}, "level": 3, "levels": 3}]
    assert "max-concurrency 1 was measured before a restart" in again.log_tail
    assert again.by_load[:2] == first.by_load[:2]  # taken from the checkpoint, not measured
    assert again.metrics == first.by_load[0]["metrics"]
    assert again.by_load[2]["status"] == "ok" and again.by_load[2]["batch_size"] == 4
    assert not checkpoint_path(tmp / "baseline.log").exists()


def test_a_batch_without_loads_keeps_its_record_as_it_was(
    engine: LocalEngine, runs: dict[str, Any]
) -> None:
    plan = dataclasses.replace(_plan([1]), loads=None, slo={})
    record = _run(engine, plan, 0, runs["tmp"])
    assert record.status == "ok", record.log_tail
    assert "by_load" not in json.loads(record.to_json())
    assert set(record.metrics) == {"output_throughput", "total_throughput", "accept_length"}
    assert "--loads" not in record.log_tail.splitlines()[0]
    # An SLO without loads: one level, the latencies kept so it can be judged.
    with_slo = _run(engine, dataclasses.replace(plan, slo={"p99_ttft_ms": 1000.0}), 0,
                    runs["tmp"])
    assert "by_load" not in json.loads(with_slo.to_json())
    assert all(len(with_slo.metrics[k]) == plan.reps for k in LATENCY_KEYS)
    assert engine.launcher.fresh == 0 and engine.launcher.servers == 1  # one warm server


def test_request_rate_is_refused_before_any_run() -> None:
    plan = dataclasses.replace(_plan([1, 2]), loads={"request-rate": [1, 2]})
    reasons = LocalEngine(fork=False).preflight(plan)
    assert set(reasons) == {"baseline", "prompt-lookup"}
    reason = reasons["baseline"]
    assert "\n" not in reason and "--request-rate" in reason and "no arrival rate" in reason
    match = load_rules().classify(reason)
    assert match is not None and match.tag == "bad-config"
    assert LocalEngine(fork=False).preflight(_plan([1, 2])) == {}


def test_the_child_refuses_levels_out_of_order() -> None:
    for bad in ("[2, 1]", "[1, 1]", "[0, 2]", '[1, "x"]', "[1, true]", "1,4", "4"):
        with pytest.raises(SystemExit):
            local_child.parse_args(["--loads", bad])
    assert local_child.parse_args(["--loads", "[1, 4]"]).loads == [1, 4]
    assert local_child.parse_args(["--max-concurrency", "3"]).max_concurrency == 3


def test_the_cpu_loads_preset_resolves_with_an_slo_the_engine_reports() -> None:
    plan = resolve(load_preset("cpu-loads"))
    assert plan.engine == "local" and plan.loads == {"max-concurrency": [1, 2, 8]}
    assert set(plan.slo) <= set(LATENCY_KEYS)
    assert plan.bench["num-prompts"] >= max(plan.loads["max-concurrency"])
    assert LocalEngine(fork=False).preflight(plan) == {}


def _argv(args: Any) -> list[str]:
    return ["--num-prompts", str(args.num_prompts), "--input-len", str(args.input_len),
            "--output-len", str(args.output_len), "--threads", "1"]


def _plan(levels: list[int]) -> BatchPlan:
    """cpu-loads with a tiny bench, two repetitions and `levels`."""
    full = resolve(load_preset("cpu-loads"))
    return dataclasses.replace(full, reps=2, startup_s=60, bench_s=30, bench=dict(BENCH),
                               loads={"max-concurrency": levels})
