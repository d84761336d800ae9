"""The verify-time budget in the why (docs/contracts.md "Evidence for the why"): how much of one
draft+verify cycle the all-reduces take, against what the cycle may take.

With a record's `evidence` (the model's all-reduces per step and their measured latency at the
step's message size), a speculative approach's break-even gains `allreduces` and `comm_ms`, and
its why the seed's sentence: "122 all-reduces × 0.25 ms = 30.5 ms of a 48.2 ms cycle; it must
take ≤ 31.8 ms". An approach whose all-reduce is slower than its parent's or the baseline's says
by how much; on a PCIe host it names contention for the link as the mechanism. Without evidence
every function here answers None and the why stays today's break-even line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.records import RunRecord
from jobs.core.verdicts._verdicts import median

SLOWER_PCT = 5.0  # an all-reduce this much slower than the reference's is worth a sentence


def cycle_ms(accept_length: float, throughput: float) -> float:
    """One draft+verify cycle's ms at `throughput` tokens/s: `accept_length` tokens a cycle
    (the break-even's `now_ms` at the approach's throughput, `needed_ms` at the baseline's)."""
    return round(accept_length / throughput * 1000.0, 1)


def comm_ms(count: int, latency_us: float) -> float:
    """The ms of `count` all-reduces of `latency_us` each, as the why writes it."""
    return round(count * latency_us / 1000.0, 1)


def allreduce_of(record: RunRecord) -> tuple[int, float] | None:
    """(all-reduces per step, latency in µs) from the record's evidence; None without both."""
    evidence = record.extra.get("evidence")
    if not isinstance(evidence, Mapping):
        return None
    allreduce = evidence.get("allreduce")
    count = evidence.get("allreduces")
    if not isinstance(allreduce, Mapping) or not isinstance(count, int) or count <= 0:
        return None
    latency = allreduce.get("latency_us")
    if isinstance(latency, bool) or not isinstance(latency, int | float) or latency <= 0:
        return None
    return count, float(latency)


def is_split(record: RunRecord) -> bool:
    """Whether the record's evidence is what a split would cost (an engine of one process)."""
    evidence = record.extra.get("evidence")
    return isinstance(evidence, Mapping) and evidence.get("split") is True


def with_comm(break_even: dict[str, float] | None, record: RunRecord) -> dict[str, Any] | None:
    """`break_even` with `allreduces` and `comm_ms` added when the record has evidence."""
    found = allreduce_of(record)
    if break_even is None or found is None or is_split(record):
        return break_even
    count, latency_us = found
    return {**break_even, "allreduces": count, "comm_ms": comm_ms(count, latency_us)}


def budget_sentence(break_even: Mapping[str, Any], record: RunRecord) -> str | None:
    """'122 all-reduces × 0.25 ms = 30.5 ms of a 48.2 ms cycle; it must take ≤ 31.8 ms', with
    what that means for the cycle; None without evidence."""
    found = allreduce_of(record)
    if found is None or "now_ms" not in break_even:
        return None
    count, latency_us = found
    comm = comm_ms(count, latency_us)
    now, needed = float(break_even["now_ms"]), float(break_even["needed_ms"])
    if is_split(record):  # one process: no all-reduce today, what a split would add
        return (f"split over ranks, its cycle would add {count} all-reduces × "
                f"{latency_us / 1000.0:.2f} ms = {comm:.1f} ms to its {now:.1f} ms (it must "
                f"take ≤ {needed:.1f} ms)")
    text = (f"{count} all-reduces × {latency_us / 1000.0:.2f} ms = {comm:.1f} ms of a "
            f"{now:.1f} ms cycle; it must take ≤ {needed:.1f} ms")
    if comm >= needed:
        return text + ": the all-reduces alone take more than the whole cycle may"
    if comm * 2 >= now:
        return text + ": communication is most of the cycle"
    return text


def slower_sentence(record: RunRecord, others: Mapping[str, RunRecord]) -> str | None:
    """How much slower this record's all-reduce is than its parent's (else the baseline's),
    and on PCIe the mechanism; None when it is not slower or either lacks evidence."""
    mine = None if is_split(record) else allreduce_of(record)
    if mine is None:
        return None
    for name in (record.parent, "baseline"):
        other = others.get(name) if name else None
        theirs = allreduce_of(other) if other is not None else None
        if theirs is None:
            continue
        pct = (mine[1] - theirs[1]) / theirs[1] * 100.0
        if pct < SLOWER_PCT:
            return None
        text = (f"its all-reduce takes {mine[1] / 1000.0:.2f} ms, {pct:.0f}% slower than "
                f"{name}'s {theirs[1] / 1000.0:.2f} ms")
        link = str(record.fingerprint.get("interconnect") or "")
        if "pcie" in link.lower():
            text += ": over PCIe the ranks contend for the link"
        return text
    return None


def comm_of(record: RunRecord, baseline: RunRecord, metric: str) -> tuple[float, float] | None:
    """(the all-reduces' ms per cycle, the ms a cycle may take to match the baseline) for a
    speculative record with evidence, on a higher-is-better throughput; None otherwise."""
    found = None if is_split(record) else allreduce_of(record)
    accept = record.accept_length
    base_value = median(baseline.samples(metric))
    if found is None or accept is None or baseline.accept_length is not None \
            or base_value is None or base_value <= 0:
        return None
    count, latency_us = found
    return comm_ms(count, latency_us), cycle_ms(accept, base_value)


def comm_share(break_even: Mapping[str, Any] | None) -> float | None:
    """The all-reduces' share of the cycle it must fit (comm_ms / needed_ms); None without."""
    if not break_even or "comm_ms" not in break_even:
        return None
    needed = float(break_even.get("needed_ms") or 0)
    return float(break_even["comm_ms"]) / needed if needed > 0 else None
