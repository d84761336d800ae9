"""What a preset asks of its engine's benchmark (issue 32, item 4): each engine's facts hold
together (its SLO keys and usual metrics are keys its benchmark reports, its bounded bench keys are
flags its bench takes), the local engine's result keys are what its child reports, and the bounds
leave a wrong type to the engine's own words. Bad presets through the real surfaces are in the
catalogue (tests/bad_inputs.yaml)."""

from __future__ import annotations

import math

import pytest

from jobs.core.engine_info import all_info, describe
from jobs.core.plans import BOUNDS, bench_problems, load_problems, metric_problems
from jobs.engines import type_table
from jobs.engines.local import child
from jobs.engines.local.serving import Pass

ENGINES = [info.name for info in all_info()]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_slo_key_and_usual_metric_is_a_key_the_benchmark_reports(engine: str) -> None:
    info = describe(engine)
    assert info.result_keys, engine
    assert [k for k in (*info.slo_keys, *info.metrics) if not info.reports(k)] == []
    assert metric_problems("output_throughput", engine=engine) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_every_bounded_bench_key_is_a_flag_of_the_engine_s_bench(engine: str) -> None:
    table = type_table(engine)
    assert table is not None
    bounds = describe(engine).bench_bounds
    assert bounds, engine
    assert sorted(k for k in bounds if k not in table.bench) == []
    assert sorted(set(bounds.values()) - set(BOUNDS)) == []
    assert {"num-prompts", "max-concurrency"} <= set(bounds)


def test_the_local_engine_s_result_keys_are_what_its_child_reports(
    capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    served = Pass(outputs=[[1, 2, 3], [4, 5]], seconds=0.5, forwards=4, ttft_s=[0.1, 0.2],
                  e2e_s=[0.3, 0.4], batch_sizes=[2])
    child.pass_event(served, [[7, 8], [9]], rep=1)
    (line,) = capsys.readouterr().out.splitlines()
    event = json.loads(line.removeprefix(child.EVENT_PREFIX))
    numbers = {k for k, v in event.items() if isinstance(v, int | float) and k != "rep"}
    assert numbers == set(describe("local").result_keys)


def test_vllm_s_latency_keys_follow_its_percentile_options() -> None:
    vllm = describe("vllm")
    for key in ("p99_ttft_ms", "median_tpot_ms", "mean_e2el_ms", "p99.9_itl_ms", "p90_e2el_ms",
                "std_client_queue_time_ms", "spec_decode_acceptance_length"):
        assert vllm.reports(key), key
    for key in ("p99_ttft", "ttft_ms", "total_throughput", "accept_length", "p_ttft_ms"):
        assert not vllm.reports(key), key


@pytest.mark.parametrize(("bench", "ok"), [
    ({"num-prompts": 100_000}, True),
    ({"num-prompts": 100_001}, False),
    ({"num_prompts": 100_001}, False),  # as bench_serving's own dest spells it
    ({"num-prompts": 1.5}, True),  # a wrong type is the engine's types' to refuse, in its words
    ({"num-prompts": "many"}, True),
    ({"request-rate": math.inf}, True),  # all at once, the benchmarks' default
    ({"request-rate": "inf"}, True),
    ({"request-rate": 0}, False),
    ({"request-rate": 0.5}, True),
    ({"random-output-len": 0}, True),
    ({"random-output-len": 10_000_001}, False),
    ({"dataset-name": "random"}, True),
])
def test_bench_bounds(bench: dict[str, object], ok: bool) -> None:
    assert (bench_problems(bench, engine="sglang") == []) is ok


def test_a_load_level_has_the_bounds_of_its_knob() -> None:
    assert load_problems({"request-rate": [1, math.inf]}, bench={})[0][1].endswith(
        "level inf is not a number")
    assert load_problems({"request-rate": [1, 200_000]}, bench={})[0][1].endswith(
        "level 200,000 must be more than 0 and at most 100,000 requests a second")
    assert load_problems({"max-concurrency": [1, 100_000]}, bench={}) == []
