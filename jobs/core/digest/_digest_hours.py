"""The digest's hours, pure: how long the runs kept their host busy, in GPU-hours on a host with
GPUs and in CPU-hours where there is no GPU (a CPU host is never said to spend GPU-hours).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.memory import known_from
from jobs.core.plans import BatchRow
from jobs.core.records import RunRecord


def run_hours(record: RunRecord) -> float | None:
    """Server-up time (finished_at - started_at) × the fingerprint's gpu_count (1 when absent
    or 0: a CPU host's hours count once); None without both times."""
    began, ended = _time(record.started_at), _time(record.finished_at)
    if began is None or ended is None or ended < began:
        return None
    count = record.fingerprint.get("gpu_count")
    gpus = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    return (ended - began).total_seconds() / 3600.0 * gpus


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed


def hours_unit(record: RunRecord) -> str:
    """What a run's hours are counted in: "GPU-hours" on a host with GPUs, else "CPU-hours"
    (a CPU host's run counts its wall time once)."""
    count, gpu = record.fingerprint.get("gpu_count"), record.fingerprint.get("gpu")
    no_gpu = count == 0 or (count is None and (gpu is None or str(gpu).startswith("none")))
    return "CPU-hours" if no_gpu else "GPU-hours"


def hours_per_preset(
    window: Sequence[BatchRow], records: Mapping[str, Sequence[RunRecord]]
) -> list[dict[str, Any]]:
    """The hours the window's runs took, per preset and unit (GPU-hours on GPU hosts,
    CPU-hours where there is no GPU). A known dead end started nothing and a run without both
    times (skipped, never started) took nothing: neither counts."""
    spent: dict[tuple[str, str], list[float]] = {}
    for row in window:
        for record in records.get(row.id, ()):
            hours = None if known_from(record) else run_hours(record)
            if hours is not None:
                spent.setdefault((row.preset, hours_unit(record)), []).append(hours)
    return [{"preset": preset, "unit": unit, "hours": round(sum(hours), 2), "runs": len(hours)}
            for (preset, unit), hours in sorted(spent.items())]
