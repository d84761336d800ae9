"""One configuration to run (`RunConfig`) and the two rules every configuration is built with:
how server args layer (`merge_args`) and when two knob values are the same (`is_same_value`).

Batch plans (`jobs.core.plans`) resolve a preset's baseline and approaches into these; a sweep's
points (`jobs.core.sweeps`) are made from their parent's the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunConfig:
    """One configuration to run: what the engine needs and what the record must carry."""

    approach: str
    role: str
    parent: str | None
    hypothesis: str
    change: dict[str, dict[str, Any]]
    server_args: dict[str, Any]
    env: dict[str, str]


def merge_args(args: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Server args layered: `false`/`null` removes a flag."""
    merged = dict(args)
    for key, value in extra.items():
        if value is None or value is False:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def is_same_value(a: Any, b: Any) -> bool:
    """Equal knob values; numbers by value (128 and 128.0 are one setting)."""
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return bool(a == b)
