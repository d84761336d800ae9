"""What the throughput-against-latency charts (a sweep's, the load levels') share: an axis's
label, the latency a set of records carries, and the Pareto front of (throughput, latency)
points."""

from __future__ import annotations

from jobs.core.records import RunRecord
from jobs.core.units import unit_of

LATENCIES = ("median_itl_ms", "median_ttft_ms")


def axis_label(metric: str, better: str) -> str:
    """'output_throughput (tok/s, higher is better)'; the unit left out when unknown."""
    unit = unit_of(metric)
    return f"{metric} ({unit + ', ' if unit else ''}{better})"


def latency_metric(records: list[RunRecord]) -> str | None:
    """The latency the records carry (ITL first, then TTFT), or None."""
    for name in LATENCIES:
        if any(r.samples(name) for r in records):
            return name
    return None


def pareto_front(points: list[tuple[str, float, float]]) -> list[str]:
    """(name, throughput, latency) -> the names no other point beats on both, by throughput."""
    front = [name for name, tput, lat in points
             if not any(t >= tput and la <= lat and (t > tput or la < lat)
                        for other, t, la in points if other != name)]
    order = {name: tput for name, tput, _ in points}
    return sorted(front, key=lambda n: order[n])
