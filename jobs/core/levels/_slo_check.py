"""Whether one run met a batch's SLO at every load level (docs/contracts.md "Load levels and
service-level objectives"), straight from its record: what a sweep searches under.

A level meets the SLO when it ran to the end (`status` ok) and the median of every SLO key's
repetitions is at most its limit. A level that did not run to the end, or that lacks a key, is
*unmeasured*: it meets nothing, so a run with an unmeasured level is never within the SLO, however
well its other levels did. A run of a batch without loads is one level, its own.

`slo_breaches` lists what is wrong, one `Breach` per level and key (the words for each in
`Breach.text`); `slo_excess` is the same judgement as one number for a model to learn: the largest
relative excess of a median over its limit, `median / limit - 1`, over every level and key, so
that zero or less means met everywhere (and how far below zero, by how much), None when a level
is unmeasured. Pure: no store, no engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from jobs.core.levels._levels import breach_text, slo_medians
from jobs.core.plans import load_label
from jobs.core.records import RunRecord

__all__ = ["Breach", "level_runs", "slo_breaches", "slo_excess"]


class Breach(NamedTuple):
    """One SLO key at one level whose median breaks its limit (`median` None: not measured)."""

    load: dict[str, Any]  # {} for a batch without loads
    key: str
    median: float | None
    limit: float

    @property
    def text(self) -> str:
        """'p99_ttft_ms 1420 ms > 1000 ms at max-concurrency 16' (or 'not measured at ...')."""
        where = f" at {load_label(self.load)}" if self.load else ""
        if self.median is None:
            return f"{self.key} not measured{where}"
        return breach_text(self.key, self.median, self.limit) + where


def level_runs(record: RunRecord) -> list[tuple[dict[str, Any], RunRecord]]:
    """(load, the run at that level) for every level the record lists, lowest first; the record
    itself, as one level without a load, when it has no levels."""
    levels = record.by_load
    if not levels:
        return [({}, record)]
    return [(dict(level["load"]), record.at_level(i)) for i, level in enumerate(levels)]


def _medians(record: RunRecord, slo: Mapping[str, float]
             ) -> list[tuple[dict[str, Any], str, float | None, float]]:
    """(load, key, median or None when unmeasured, limit) for every level and SLO key."""
    out: list[tuple[dict[str, Any], str, float | None, float]] = []
    for load, run in level_runs(record):
        found = slo_medians(run, slo) if run.status == "ok" else {}
        out.extend((load, key, found.get(key), float(limit)) for key, limit in slo.items())
    return out


def slo_breaches(record: RunRecord, slo: Mapping[str, float]) -> list[Breach]:
    """Every (level, key) whose median breaks its limit or was not measured, lowest level first;
    [] when the run met the SLO at every level (or there is no SLO)."""
    return [Breach(load, key, value, limit) for load, key, value, limit in _medians(record, slo)
            if value is None or value > limit]


def slo_excess(record: RunRecord, slo: Mapping[str, float]) -> float | None:
    """The largest `median / limit - 1` over every level and SLO key: <= 0 when the SLO is met
    at every level; None when a level is unmeasured (or there is no SLO to meet)."""
    found = _medians(record, slo)
    if not found or any(value is None for _, _, value, _ in found):
        return None
    return max(value / limit - 1.0 for _, _, value, limit in found if value is not None)
