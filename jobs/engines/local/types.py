"""The local engine's flag types, from its child's own argparse declaration."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterator

from jobs.engines.flag_types import FlagType, TypeTable
from jobs.engines.local import child


def from_action(action: argparse.Action) -> Iterator[tuple[str, FlagType]]:
    """An argparse action of the child as (name, FlagType) for each of its long options."""
    low = high = None
    if action.nargs == 0:
        kind = "switch"
    elif isinstance(action.type, child.Count):
        kind = "positive_int" if action.type.low == 1 else "int"
        low, high = action.type.low, action.type.high
    else:
        kinds: dict[object, str] = {
            int: "int", child.positive_int: "positive_int", float: "float", None: "str",
            str: "str",
        }
        kind = kinds.get(action.type, "opaque")
    nargs = action.nargs if action.nargs in ("?", "+", "*") else None
    choices = tuple(action.choices) if action.choices is not None else None
    for option in action.option_strings:
        if option.startswith("--"):
            name = option[2:]
            yield name, FlagType(flag=name, kind=kind, nargs=nargs, choices=choices,
                                 low=low, high=high,
                                 source="jobs/engines/local/child.py build_parser")


@functools.lru_cache(maxsize=1)
def local_table() -> TypeTable:
    return TypeTable(
        engine="local engine",
        server=dict(kv for a in child.knob_actions("server") for kv in from_action(a)),
        bench=dict(kv for a in child.knob_actions("bench") for kv in from_action(a)),
    )
