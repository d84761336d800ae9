"""Bench of the sweep search (issue 12): servers needed to reach the optimum, adaptive vs grid,
over synthetic landscapes on the 40-point, two-knob grid of the tests, and the search's own
overhead per proposal.

A landscape is a smooth bump (its peak somewhere on the grid) plus 0.5 % noise. "Servers to the
optimum" counts the points that got a server until the landscape's best point was measured: in
grid order for `grid`, as proposed for `adaptive` (with a budget of the whole grid, so that it
always gets there).
"""

from __future__ import annotations

import math
import random
import statistics
import time

from tests.jobs.test_search import plan_of

PEAKS = [(0, 0), (2, 1), (3, 4), (5, 2), (7, 4), (6, 0), (1, 3), (4, 1), (7, 2), (2, 4)]


def _servers_to_optimum(search: str, peak: tuple[int, int], seed: int) -> tuple[int, list[float]]:
    from jobs.search import next_point

    text_budget = "budget: 40" if search == "adaptive" else ""
    plan = plan_of(_preset(search, text_budget))
    sweep = plan.sweep
    assert sweep is not None
    rng = random.Random(seed)

    def value(i: int, j: int) -> float:
        bump = 40 * math.exp(-((i - peak[0]) ** 2 / 8 + (j - peak[1]) ** 2 / 3))
        return (80 + bump) * (1 + rng.gauss(0, 0.005))

    measured: dict[str, float | None] = {}
    if sweep.same_as_baseline is not None:
        measured[sweep.same_as_baseline] = value(*sweep.point(sweep.same_as_baseline).index)
    times: list[float] = []
    servers = 0
    while True:
        began = time.perf_counter()
        name = next_point(sweep, measured, lower_is_better=False, batch=f"b-bench{seed}")
        times.append(time.perf_counter() - began)
        if name is None:
            raise RuntimeError("the optimum was never measured")
        servers += 1
        point = sweep.point(name)
        measured[name] = value(*point.index)
        if point.index == peak:
            return servers, times


def _preset(search: str, budget: str) -> str:
    from tests.jobs.test_search import SWEPT

    text = SWEPT.replace("search: adaptive", f"search: {search}")
    return text.replace("budget: 12", budget) if budget else text.replace("  budget: 12\n", "")


def run() -> dict[str, str]:
    grid, adaptive, overhead = [], [], []
    for seed, peak in enumerate(PEAKS):
        if peak == (7, 2):  # the baseline itself: no server needed by either
            continue
        grid.append(_servers_to_optimum("grid", peak, seed)[0])
        servers, times = _servers_to_optimum("adaptive", peak, seed)
        adaptive.append(servers)
        overhead.extend(times)
    n = len(grid)
    return {
        f"search.servers_to_optimum grid (median / worst of {n} landscapes, 40 points)":
            f"{statistics.median(grid):.0f} / {max(grid)}",
        f"search.servers_to_optimum adaptive (median / worst of {n})":
            f"{statistics.median(adaptive):.0f} / {max(adaptive)}",
        "search.adaptive_found_within_12_servers": f"{sum(s <= 12 for s in adaptive)} of {n}",
        "search.overhead_per_proposal_ms (median / p90 / max)":
            f"{statistics.median(overhead) * 1000:.0f} / "
            f"{sorted(overhead)[int(0.9 * (len(overhead) - 1))] * 1000:.0f} / "
            f"{max(overhead) * 1000:.0f}",
    }


if __name__ == "__main__":
    for key, figure in run().items():
        print(f"{key}: {figure}")
