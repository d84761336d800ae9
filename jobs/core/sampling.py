"""The sampling a batch's requests were generated with, as its run records keep it, and the
sampling difference between two batches (docs/contracts.md "Run record" and "Sampling").

A record's `sampling` names the sampling parameters every request of its benchmark carried
(`{"temperature": 0.0}`); `temperature: null` means the bench client sent none, so the server's
default sampling applied (a bench client that sends no temperature by default). How often a
draft is accepted depends on it: EAGLE-3 measured greedily and measured at the model's default
temperature are two different experiments, so `compare` names a difference. Records written
before the key have none ("not recorded").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobs.core.records import RunRecord


def record_sampling(record: RunRecord) -> dict[str, Any] | None:
    """The record's `sampling`, or None when it has none (an older record, or a configuration
    that never reached its engine)."""
    value = record.extra.get("sampling")
    return dict(value) if isinstance(value, Mapping) else None


def sampling_of(records: Iterable[RunRecord]) -> dict[str, Any] | None:
    """A batch's sampling: its baseline's, else the first record's that has one."""
    ordered = sorted(records, key=lambda r: r.role != "baseline")
    return next((found for r in ordered if (found := record_sampling(r)) is not None), None)


def sampling_difference(a: Iterable[RunRecord], b: Iterable[RunRecord]) -> dict[str, Any]:
    """Batch A's and B's sampling, the parameters that differ (`changes`: key, a, b; None is
    "not sent": the server's default) and, when they differ, a `warning` line."""
    ours, theirs = sampling_of(a), sampling_of(b)
    out: dict[str, Any] = {"a": ours, "b": theirs, "changes": [], "warning": None}
    if ours is None or theirs is None:
        return out
    keys = [*ours, *(k for k in theirs if k not in ours)]
    out["changes"] = [{"key": k, "a": ours.get(k), "b": theirs.get(k)} for k in keys
                      if ours.get(k) != theirs.get(k)]
    if out["changes"]:
        moved = ", ".join(f"{c['key']} {_shown(c['a'])} → {_shown(c['b'])}"
                          for c in out["changes"])
        out["warning"] = (f"the batches sampled differently ({moved}): acceptance and "
                          "throughput are measured under different sampling")
    return out


def _shown(value: Any) -> str:
    return "the server's default" if value is None else str(value)
