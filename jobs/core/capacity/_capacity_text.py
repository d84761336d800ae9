"""Capacity in words (docs/contracts.md "Capacity under the SLO"): what the summaries say of a
report's `capacity`, the baseline's and each result's. The templates call these (through
`jobs.core.messages`), so the text, the Slack table and the chat thread read alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.capacity._search import PRECISION_PCT, Spec
from jobs.core.units import with_unit

MARKS = {"improved": "▲", "regressed": "▼", "unchanged": "=", "inconclusive": "?",
         "failed": "✗", "cancelled": "■", "skipped": "·"}


def _spec(report: Mapping[str, Any]) -> Spec | None:
    found = report.get("capacity")
    if not isinstance(found, Mapping):
        return None
    return Spec.of(found)


def _limits(slo: Mapping[str, float]) -> str:
    return ", ".join(f"{key} ≤ {with_unit(f'{limit:g}', key)}" for key, limit in slo.items())


def capacity_line(report: Mapping[str, Any]) -> str:
    """'Capacity: max-concurrency from 1 up to 512, doubling then bisecting to 2% or 1 request,
    within median_tpot_ms ≤ 20 ms' ('' for a batch without a capacity search)."""
    spec, found = _spec(report), report.get("capacity") or {}
    if spec is None:
        return ""
    unit = "1 request" if spec.knob == "max-concurrency" else "0.1 req/s"
    text = (f"Capacity: {spec.knob} from {spec.as_load(spec.start):g} up to "
            f"{spec.as_load(spec.max):g}, doubling then bisecting to {PRECISION_PCT:g}% or "
            f"{unit}")
    if not report.get("slo") and found.get("slo"):  # else the SLO line above says it
        caveats = found.get("slo_caveats") or []
        text += f", within {_limits(found['slo'])}" + (
            f" ({'; '.join(caveats)})" if caveats else "")
    if report.get("metric") != "capacity":
        text += (f"; the table's {report.get('metric')} is at {spec.knob} "
                 f"{spec.as_load(spec.start):g}, the search's first level")
    return text


def _goodput(entry: Mapping[str, Any]) -> str:
    value, key = entry.get("goodput"), entry.get("goodput_key") or "output_throughput"
    if not isinstance(value, int | float):
        return ""
    shown = f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"
    return f" · goodput {with_unit(shown, key)} at capacity"


def baseline_rows(report: Mapping[str, Any]) -> list[str]:
    """The baseline's capacity, under its row: ['capacity: the baseline carries 40 concurrent
    requests within the SLO; p99_ttft_ms binds · goodput 812 tok/s at capacity']."""
    entry = report.get("baseline", {}).get("capacity")
    if not isinstance(entry, Mapping):
        return []
    return [f"capacity: {entry.get('why')}{_goodput(entry)}"]


def result_rows(result: Mapping[str, Any], report: Mapping[str, Any]) -> list[str]:
    """A result's capacity, under its row: its verdict's mark and why (with `metric: capacity`
    the row's own why says it: only the goodput)."""
    entry = result.get("capacity")
    if not isinstance(entry, Mapping):
        return []
    if report.get("metric") == "capacity":
        goodput = _goodput(entry).removeprefix(" · ")
        return [goodput] if goodput else []
    mark = MARKS.get(str(entry.get("verdict")), "?")
    return [f"capacity {mark} {entry.get('why')}{_goodput(entry)}"]
