"""The capacity search (docs/contracts.md "Capacity under the SLO"), as pure logic: the load it
proposes next from the levels measured so far, what it finds, within its precision and its
level budget, and which key binds. The engines only measure what it proposes (tests of them:
test_capacity_cli.py, engines/test_local_capacity.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from jobs.core.capacity import (
    MAX_LEVELS,
    Spec,
    binding_key,
    level_state,
    measured,
    next_load,
    section,
)

Figures = Callable[[float], Mapping[str, list[float]]]


def search(spec: Spec, figures: Figures, slo: Mapping[str, float]) -> dict[str, Any]:
    """Every level the search proposes, measured by `figures`, as the record keeps it."""
    levels, entries = [], []
    while (load := next_load(spec, levels)) is not None:
        metrics = figures(load)
        entries.append({"load": spec.load(load), "metrics": metrics, "status": "ok"})
        levels.append(measured(load, metrics, slo))
    return section(spec, entries, slo)


def ttft(per_request: float) -> Figures:
    """A TTFT that grows by `per_request` ms with each request beside the first (the stand-ins'
    model), two repetitions a level."""
    return lambda c: {"p99_ttft_ms": [100.0 + per_request * (c - 1)] * 2}


@pytest.mark.parametrize("growth", [7.0, 23.0, 61.0, 250.0])
def test_it_finds_the_largest_load_that_holds_within_its_precision(growth: float) -> None:
    spec, slo = Spec("max-concurrency", 1, 512), {"p99_ttft_ms": 3000.0}
    implied = math.floor(1 + 2900.0 / growth)  # 100 + growth (c - 1) <= 3000
    found = search(spec, ttft(growth), slo)
    assert implied - spec.precision(implied) <= found["value"] <= implied
    assert found["above"] is not None and found["value"] < found["above"]
    assert found["above"] - found["value"] <= spec.precision(found["value"])
    assert found["binding"] == "p99_ttft_ms" and found["complete"] is True
    assert len(found["levels"]) <= MAX_LEVELS
    loads = [level["load"]["max-concurrency"] for level in found["levels"]]
    broke = [level["slo"] for level in found["levels"]].index("violated")
    assert loads[:broke + 1] == [2 ** i for i in range(broke + 1)]  # doubling from `from` ...
    assert all(loads[broke - 1] < load < loads[broke] for load in loads[broke + 1:])  # bisecting


def test_the_first_doubling_that_breaks_starts_the_bisection() -> None:
    spec = Spec("max-concurrency", 1, 512)
    found = search(spec, ttft(100.0), {"p99_ttft_ms": 3000.0})  # holds up to 30
    assert [lv["load"]["max-concurrency"] for lv in found["levels"]] == [
        1, 2, 4, 8, 16, 32, 24, 28, 30, 31]
    assert [lv["slo"] for lv in found["levels"]] == ["met"] * 5 + ["violated", "met", "met",
                                                                  "met", "violated"]
    assert (found["value"], found["above"]) == (30, 31)
    assert found["levels"][5]["broken"] == {"p99_ttft_ms": 3200.0}


def test_the_binding_key_is_the_one_that_broke_first_above_the_capacity() -> None:
    """TPOT breaks from 12 requests, TTFT only from 40: TPOT binds; with the limits the other
    way round, TTFT does."""
    def figures(c: float) -> dict[str, list[float]]:
        return {"median_ttft_ms": [100.0 * c] * 2, "median_tpot_ms": [10.0 + 5.0 * c] * 2}

    spec = Spec("max-concurrency", 1, 64)
    tpot_first = search(spec, figures, {"median_ttft_ms": 3999.0, "median_tpot_ms": 69.0})
    assert (tpot_first["value"], tpot_first["binding"]) == (11, "median_tpot_ms")
    ttft_first = search(spec, figures, {"median_ttft_ms": 999.0, "median_tpot_ms": 400.0})
    assert (ttft_first["value"], ttft_first["binding"]) == (9, "median_ttft_ms")


def test_of_two_keys_broken_at_one_load_the_one_furthest_over_its_limit_binds() -> None:
    levels = [measured(1, {"a_ms": [1.0], "b_ms": [1.0]}, {"a_ms": 10, "b_ms": 10}),
              measured(2, {"a_ms": [12.0], "b_ms": [30.0]}, {"a_ms": 10, "b_ms": 10})]
    assert binding_key(levels) == "b_ms"


def test_a_key_the_level_did_not_report_breaks_it() -> None:
    holds, broken = level_state({"p99_ttft_ms": [1.0, 2.0]}, {"p99_ttft_ms": 10,
                                                              "median_tpot_ms": 5})
    assert holds is False and broken == {"median_tpot_ms": math.inf}
    holds, broken = level_state({"p99_ttft_ms": [1.0, 30.0, 2.0]}, {"p99_ttft_ms": 10})
    assert holds is True and broken == {}  # the median over the repetitions holds


def test_nothing_broke_up_to_max_the_capacity_is_max_and_nothing_binds() -> None:
    spec = Spec("max-concurrency", 1, 48)
    found = search(spec, ttft(1.0), {"p99_ttft_ms": 3000.0})
    assert [lv["load"]["max-concurrency"] for lv in found["levels"]] == [1, 2, 4, 8, 16, 32, 48]
    assert (found["value"], found["binding"], found["above"]) == (48, None, None)
    assert found["complete"] is True


def test_from_that_breaks_is_no_capacity() -> None:
    spec = Spec("max-concurrency", 4, 64)
    found = search(spec, ttft(1000.0), {"p99_ttft_ms": 3000.0})
    assert [lv["load"] for lv in found["levels"]] == [{"max-concurrency": 4}]
    assert (found["value"], found["binding"], found["above"]) == (None, "p99_ttft_ms", 4)


def test_a_request_rate_is_searched_to_a_tenth_or_two_percent() -> None:
    spec = Spec("request-rate", 0.5, 64.0)
    found = search(spec, lambda r: {"p99_ttft_ms": [100.0 * (1 + r)]}, {"p99_ttft_ms": 3000.0})
    assert found["value"] == 29.0  # 100 (1 + r) <= 3000
    assert found["above"] - found["value"] <= max(0.1, 0.02 * 29.0)
    assert all(round(lv["load"]["request-rate"], 1) == lv["load"]["request-rate"]
               for lv in found["levels"])
    slow = search(Spec("request-rate", 0.1, 2.0), lambda r: {"p99_ttft_ms": [2900.0 + 100 * r]},
                  {"p99_ttft_ms": 3000.0})
    assert (slow["value"], slow["above"]) == (1.0, 1.1)  # one unit: 0.1 req/s


def test_at_most_sixteen_levels_and_an_unfinished_search_says_so() -> None:
    spec = Spec("max-concurrency", 1, 100_000)
    found = search(spec, ttft(0.001), {"p99_ttft_ms": 3000.0})
    assert len(found["levels"]) == MAX_LEVELS
    assert found["value"] == 2 ** 15 and found["above"] is None
    assert found["complete"] is False
