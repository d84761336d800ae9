"""A sweep against the approach it started from (docs/contracts.md "A sweep and its confirmation are
one experiment"): a sweep that `extends` an approach searches around it, so its best point is worth
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
    confirmed: Mapping[str, Any] | None = None,
    objective: str | None = None,
) -> dict[str, Any] | None:
    """`{"approach", "value", "delta_pct", "better", "why"}` of the best point against the
    approach the sweep extends; None without a parent or without both values. `better` is False
    when the point is not better by at least the report's minimum effect: then `why` says that
    the sweep found nothing better than the approach it started from.

    After a confirmation (`confirmed`: its batch and value) the point's figure is the
    confirmation's: every figure a person reads about the winner is. With load levels the
    values are `objective` (a geometric mean over the levels), and the why names it so."""
    if extends is None:
        return None
    parent = next((r for r in report.get("results") or [] if r.get("approach") == extends), None)
    value = None if parent is None else parent.get("value")
    ours = confirmed["value"] if confirmed is not None else best.get("value")
    if value is None or ours is None:
        return None
    raw = change_pct(float(ours), float(value), lower_is_better=lower_is_better)
    if raw is None:
        return None
    delta = round(raw, 1)
    metric, effect = str(report.get("metric") or ""), float(report.get("min_effect_pct") or 0.0)
    shown = with_unit(f"{float(value):.4g}", metric)
    point = with_unit(f"{float(ours):.4g}", metric)
    if objective is not None:
        shown = f"{shown}, {objective}"
    if confirmed is not None:
        point = f"{point} in its confirmation {confirmed['batch']}"
    better = delta >= effect and delta > 0
    if better:
        measured = f"; {best.get('approach')} {point}" if confirmed is not None else ""
        why = f"{delta:+.1f}% over {extends} ({shown}), the approach it started from{measured}"
    else:
        within = f", within the {effect:g}% minimum effect" if delta > 0 else ""
        why = (f"{NOTHING_BETTER}: its best point {best.get('approach')} {point} is "
               f"{delta:+.1f}%{within} against {extends} {shown}")
    return {"approach": extends, "value": value, "delta_pct": delta, "better": better,
            "why": why}
