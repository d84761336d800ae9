"""The warm-up pass is recorded but never a sample: verdicts, ranges and medians see the
repetitions only, and a record file carries the warm-up through `analyze` untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.core.records import parse_lines
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, judge, median
from jobs.errors import RecordError

# The cold first pass the issue measured: 459 tok/s against 879 and 837 when warm.
COLD = 459.0


def line(approach: str, samples: list[float], warmup: dict[str, Any] | None) -> str:
    return json.dumps({
        "batch": "b-warm", "preset": "cpu-demo", "approach": approach,
        "role": "baseline" if approach == "baseline" else "approach", "status": "ok",
        "metrics": {"output_throughput": samples, "accept_length": None},
        "warmup": warmup,
    })


def test_a_cold_warm_up_does_not_widen_the_range() -> None:
    base, fast = parse_lines([
        line("baseline", [879.0, 837.0, 861.0], {"output_throughput": COLD, "completed": 3}),
        line("lookup", [951.0, 940.0, 962.0], {"output_throughput": COLD * 1.1, "completed": 3}),
    ])
    assert base.warmup == {"output_throughput": COLD, "completed": 3}
    assert base.samples("output_throughput") == [879.0, 837.0, 861.0]
    verdict = judge(fast, base, metric=Metric(), rules=load_rules())
    assert verdict.verdict == "improved", verdict.why
    assert verdict.value == median([951.0, 940.0, 962.0])
    # Were the warm-up a sample, both ranges would reach down to the cold pass and overlap.
    as_samples = parse_lines([
        line("baseline", [COLD, 879.0, 837.0, 861.0], None),
        line("lookup", [COLD * 1.1, 951.0, 940.0, 962.0], None),
    ])
    cold_base, cold_fast = as_samples
    assert judge(cold_fast, cold_base, metric=Metric(), rules=load_rules()).verdict == (
        "inconclusive")


def test_the_warm_up_round_trips_through_a_record_line() -> None:
    warmup = {"output_throughput": COLD, "total_throughput": 900.0, "completed": 3, "seed": 4}
    [record] = parse_lines([line("baseline", [879.0], warmup)])
    assert json.loads(record.to_json())["warmup"] == warmup
    assert "warmup" not in record.metrics
    [none] = parse_lines([line("baseline", [879.0], None)])
    assert none.warmup is None and json.loads(none.to_json())["warmup"] is None


@pytest.mark.parametrize(("warmup", "error"), [
    ([COLD], "'warmup' must be an object or null"),
    ({"output_throughput": -5}, "warmup.output_throughput holds -5"),
])
def test_a_malformed_warm_up_is_one_line(warmup: Any, error: str) -> None:
    with pytest.raises(RecordError, match=f"^runs.jsonl:1: {error}"):
        list(parse_lines([line("baseline", [879.0], warmup)], source="runs.jsonl"))
