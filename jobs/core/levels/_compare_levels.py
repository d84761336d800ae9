"""Comparison of two batches level by level (docs/contracts.md "Load levels and service-level
objectives"): when both batches ran the same load levels, each approach's row adds its levels, each
with both verdicts and the change of its median at that level, beyond noise by the same rule as the
row's (`jobs.core.digest`). Batches with different levels are compared at their lowest level only
(the records' own metrics), with a warning that says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.levels._level_text import SEPARATOR, number, wrap
from jobs.core.levels._levels import loads_text, view
from jobs.core.plans import Load, load_label
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, compare, median


def same_loads(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Load] | None:
    """The levels both reports ran ([{knob: level}, ...]); None when either has none or they
    differ."""
    ours, theirs = a.get("loads"), b.get("loads")
    if not ours or ours != theirs:
        return None
    return [{ours["knob"]: level} for level in ours["levels"]]


def loads_warning(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """A warning when the two batches ran different load levels (or one ran none)."""
    ours, theirs = a.get("loads"), b.get("loads")
    if ours == theirs:
        return None
    return (f"different load levels ({_levels(ours)} vs {_levels(theirs)}): compared at each "
            "batch's lowest level only")


def _levels(loads: Mapping[str, Any] | None) -> str:
    if not loads:
        return "one operating point"
    return loads_text([{loads["knob"]: level} for level in loads["levels"]])


def level_rows(
    name: str, a: tuple[RunRecord | None, Mapping[str, Any]],
    b: tuple[RunRecord | None, Mapping[str, Any]], *, loads: list[Load], metric: Metric,
) -> list[dict[str, Any]]:
    """One approach at each level: A's and B's verdict and value, the change and whether it is
    beyond noise. `a`/`b`: the approach's record (None when it did not run) and report."""
    out = []
    for load in loads:
        cells = [_cell(name, record, report, load, metric.name) for record, report in (a, b)]
        (old, old_samples), (new, new_samples) = cells
        change = beyond = None
        if old["value"] is not None and new["value"] is not None and old["value"] != 0:
            change = round((new["value"] - old["value"]) / old["value"] * 100.0, 1)
            verdict = compare(new_samples, old_samples, metric=metric, value=new["value"],
                              delta=change)
            beyond = verdict.verdict in ("improved", "regressed")
        better = (change or 0) < 0 if metric.lower_is_better else (change or 0) > 0
        out.append({"load": dict(load), "a": old, "b": new, "change_pct": change,
                    "beyond_noise": bool(beyond),
                    "direction": None if not beyond else "better" if better else "worse"})
    return out


def _cell(
    name: str, record: RunRecord | None, report: Mapping[str, Any], load: Load, metric: str
) -> tuple[dict[str, Any], list[float]]:
    samples = [] if record is None else view(record, load).samples(metric)
    if record is not None and record.role == "baseline":
        verdict: str | None = "baseline"
    else:
        result: Mapping[str, Any] = next(
            (r for r in report.get("results") or [] if r.get("approach") == name), {})
        level: Mapping[str, Any] = next(
            (e for e in result.get("by_load") or [] if e.get("load") == load), {})
        verdict = level.get("verdict")
    return {"verdict": verdict, "value": median(samples)}, samples


def level_lines(levels: list[dict[str, Any]] | None, *, one_line: bool = False) -> list[str]:
    """A row's levels in words: 'c=16 regressed → improved +25.0% ▲' (the change marked when
    beyond noise; a verdict that stayed is named once: 'c=1 improved +2.0%')."""
    cells = []
    for level in levels or []:
        where = load_label(level["load"], short=True)
        old, new = level["a"]["verdict"], level["b"]["verdict"]
        said = (str(new) if old == new else f"{old or 'not run'} → {new or 'not run'}")
        if old == new == "baseline":  # the reference itself: its values
            said = f"{number(level['a']['value'])} → {number(level['b']['value'])}"
        change = level["change_pct"]
        shown = f"{where} {said}" + ("" if change is None else f" {change:+.1f}%")
        if level["beyond_noise"]:
            shown += " ▲" if level["direction"] == "better" else " ▼"
        cells.append(shown)
    if not cells:
        return []
    return [SEPARATOR.join(cells)] if one_line else wrap(cells)


def moved_levels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every level that moved beyond noise, row by row: approach, load, change, direction."""
    return [{"approach": row["approach"], "load": level["load"],
             "change_pct": level["change_pct"], "direction": level["direction"]}
            for row in rows for level in row.get("levels") or [] if level["beyond_noise"]]


def moved_text(moved: list[dict[str, Any]]) -> str:
    """'eagle3 at c=4 (+11.6%, better), eagle3 at c=16 (+24.4%, better)' ('none')."""
    return ", ".join(f"{m['approach']} at {load_label(m['load'], short=True)} "
                     f"({m['change_pct']:+.1f}%, {m['direction']})" for m in moved) or "none"
