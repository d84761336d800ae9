"""The baseline measured at both ends of a batch (docs/contracts.md "Noise, measured").

A batch of three or more configurations starts its baseline's server first and once more last.
The run record keeps the closing run inside the baseline's own record, under `bracket`
(`{"metrics", "status", "started_at", "finished_at"}`, with `by_load` where the batch has load
levels, `by_category` where it ran a workload), so a batch still has exactly one baseline
record. The baseline's value stays the first run's median; both runs' samples form its range;
the drift is the second median against the first.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from jobs.core.records import STATUSES, RunRecord

CLOSING = "baseline (last)"
"""The baseline's closing run, as progress names it."""


@dataclass(frozen=True)
class Bracket:
    """The baseline's samples at the start (`first`) and at the end (`second`) of a batch."""

    first: tuple[float, ...]
    second: tuple[float, ...]
    status: str = "ok"  # the closing run's

    @property
    def medians(self) -> tuple[float | None, float | None]:
        return _median(self.first), _median(self.second)

    @property
    def samples(self) -> tuple[float, ...]:
        return (*self.first, *self.second)

    @property
    def drift_pct(self) -> float | None:
        """The second median against the first, in % of the first (raw: a fall is negative,
        whichever direction is better); None when either run has no sample."""
        first, second = self.medians
        if first is None or second is None or first == 0:
            return None
        return (second - first) / abs(first) * 100.0

    def is_beyond(self, min_effect_pct: float) -> bool:
        """Whether the host drifted beyond noise: the two runs' ranges are disjoint (touching
        counts as overlapping) and the drift is at least the minimum effect."""
        drift = self.drift_pct
        if drift is None or abs(round(drift, 6)) < min_effect_pct:
            return False
        return max(self.first) < min(self.second) or min(self.first) > max(self.second)


def closing_run(record: RunRecord) -> RunRecord | None:
    """The baseline's closing run as a record of its own (its metrics, status and levels), or
    None when the record has none."""
    found = record.extra.get("bracket")
    if not isinstance(found, dict):
        return None
    extra = {k: v for k, v in record.extra.items()
             if k not in ("bracket", "by_load", "by_category", "starts")}
    for key in ("by_load", "by_category"):
        if isinstance(found.get(key), list):
            extra[key] = found[key]
    status = found.get("status")
    metrics = found.get("metrics")
    return dataclasses.replace(
        record, status=status if status in STATUSES else "failed",
        metrics=dict(metrics) if isinstance(metrics, dict) else {}, extra=extra,
        started_at=_text(found.get("started_at")), finished_at=_text(found.get("finished_at")),
    )


def bracket_of(baseline: RunRecord, metric: str) -> Bracket | None:
    """The baseline's two runs on `metric`, or None when the batch was not bracketed."""
    closing = closing_run(baseline)
    if closing is None:
        return None
    second = closing.samples(metric) if closing.status == "ok" else []
    return Bracket(first=tuple(baseline.samples(metric)), second=tuple(second),
                   status=closing.status)


def _median(values: tuple[float, ...]) -> float | None:
    return float(statistics.median(values)) if values else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


