"""A sweep against the approach it started from (SPEC.md "A sweep and its confirmation are one
experiment"): a sweep that `extends` an approach searches around it, so its best point is worth
something only if it beats that approach, not merely the baseline.

`vs_parent` is `sweep.best.vs_parent` of the report: the best point's value against its
parent's, measured in the same batch, with `delta_pct`'s sign convention (positive: better).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.deltas import change_pct
from jobs.core.units import with_unit

NOTHING_BETTER = "the sweep found nothing better than the approach it started from"


def vs_parent(
    best: Mapping[str, Any],
    report: Mapping[str, Any],
    *,
    extends: str | None,
    lower_is_better: bool,
) -> dict[str, Any] | None:
    """`{"approach", "value", "delta_pct", "better", "why"}` of the best point against the
    approach the sweep extends; None without a parent or without both values. `better` is False
    when the point is not better by at least the report's minimum effect: then `why` says that
    the sweep found nothing better than the approach it started from."""
    if extends is None:
        return None
    parent = next((r for r in report.get("results") or [] if r.get("approach") == extends), None)
    value, ours = (None if parent is None else parent.get("value")), best.get("value")
    if value is None or ours is None:
        return None
    raw = change_pct(float(ours), float(value), lower_is_better=lower_is_better)
    if raw is None:
        return None
    delta = round(raw, 1)
    metric, effect = str(report.get("metric") or ""), float(report.get("min_effect_pct") or 0.0)
    shown = with_unit(f"{float(value):.4g}", metric)
    better = delta >= effect and delta > 0
    if better:
        why = f"{delta:+.1f}% over {extends} ({shown}), the approach it started from"
    else:
        within = f", within the {effect:g}% minimum effect" if delta > 0 else ""
        why = (f"{NOTHING_BETTER}: its best point {best.get('approach')} "
               f"{with_unit(f'{float(ours):.4g}', metric)} is {delta:+.1f}%{within} against "
               f"{extends} {shown}")
    return {"approach": extends, "value": value, "delta_pct": delta, "better": better,
            "why": why}
