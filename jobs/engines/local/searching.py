"""The local child's capacity search (docs/contracts.md "Capacity under the SLO"): its flags'
argparse types and the loads it serves, one level after another, each the next the search
(jobs.core.capacity) proposes from the levels measured so far. The child runs in one process,
so the search runs there too; the levels a checkpoint held come back in `--capacity-done`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from jobs.core.capacity import Measured, Spec, next_load


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"expected a positive value, got {value}")
    return value


def capacity_range(text: str) -> tuple[int, int]:
    """argparse type of `--capacity`: FROM,MAX, whole numbers of requests, FROM at most MAX."""
    start, top = (_positive(part) for part in text.split(","))
    if start > top:
        raise ValueError(f"expected FROM,MAX with FROM at most MAX, got {text}")
    return start, top


def limits(text: str) -> dict[str, float]:
    """argparse type of `--slo`: KEY=LIMIT,... (upper limits on a level's medians)."""
    found = {}
    for part in text.split(","):
        key, _, limit = part.partition("=")
        found[key] = float(limit)
    return found


def searched_levels(text: str) -> list[Measured]:
    """argparse type of `--capacity-done`: LOAD:1 (held) or LOAD:0 (broke), in the order they
    ran (a checkpoint's levels, taken back after a restart)."""
    out = []
    for part in filter(None, text.split(",")):
        load, _, holds = part.partition(":")
        out.append(Measured(float(_positive(load)), holds == "1"))
    return out


def add_flags(group: argparse._ArgumentGroup) -> None:
    """The search's flags, in the child's own group."""
    group.add_argument("--capacity", type=capacity_range, default=None,
                       help="FROM,MAX: search the max-concurrency that holds the --slo limits "
                       "(doubling from FROM, then bisecting), each level with its warm-up and "
                       "repetitions")
    group.add_argument("--slo", type=limits, default=None, help="KEY=LIMIT,...: the "
                       "capacity's limits on each level's medians")
    group.add_argument("--capacity-done", type=searched_levels, default=None,
                       help="LOAD:1|0,...: the levels measured before a restart")


def levels_of(args: argparse.Namespace) -> Iterator[tuple[int, int, bool]]:
    """(level number, concurrency, whether the capacity search chose it): the `--loads`, the
    single `--max-concurrency`, or each load the capacity search proposes from the levels
    measured so far (`args.capacity_done`, which the caller extends after each level)."""
    if args.capacity is None:
        for index, concurrency in enumerate(args.loads or [args.max_concurrency], 1):
            yield index, concurrency, False
        return
    spec = Spec("max-concurrency", *map(float, args.capacity))
    while (load := next_load(spec, args.capacity_done or [])) is not None:
        yield len(args.capacity_done or []) + 1, int(load), True
