"""Comparison of two batches: each approach side by side, what moved, and what differs.

Pure: two `Side`s (a batch's plan, records and report) in, plain data out. A is the older
batch, B the newer; a change is B against A.

**Beyond noise** (docs/contracts.md "Noise, measured"). A configuration's change is judged
against its spread across the batches before B on B's host and stack (`history`: at least 3 of
them, `jobs.core.noise.judge_change`), in each row's `spread`: within it the change is "within
its usual spread (±x% over n batches)" and never counts; beyond it, it counts as improved or
regressed. With fewer earlier batches the change is *unconfirmed*: it counts (`beyond_noise`)
when the verdict rule "compare" of `jobs.core.verdicts` would call B improved or regressed with
A as its baseline (the medians differ by at least the larger minimum effect of the two plans
and, with two samples or more on both sides, the [min, max] ranges do not overlap), and it says
so. An approach that failed on either side has no change; its verdicts still show.

**Different presets** are compared (approaches are matched by name) with a warning line; a
different metric or direction is refused, since the values would not be comparable.

**What is shown.** An approach that neither batch ran (a sweep point no search picked) has no
row, only its name in `not_run`. A knob change that most approaches share (an override such as
`threads 1 → 2`) is one entry of `common_knobs`, naming the approaches without it; its
per-approach entries in `knobs` carry `"common": true`, so a message states it once.

**Load levels.** When both batches ran the same levels, each row adds `levels`: both verdicts
and the change at each level (`jobs.core.levels`); different levels are a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core.levels import level_rows, loads_warning, moved_levels, same_loads
from jobs.core.noise import Point, judge_change
from jobs.core.plans import BatchPlan, RunConfig
from jobs.core.records import RunRecord
from jobs.core.sampling import sampling_difference
from jobs.core.stack import Stack, fingerprint_keys
from jobs.core.verdicts import Metric, compare, median
from jobs.errors import UserError
from jobs.redaction import is_secret_name

MASK = "••••"


@dataclass(frozen=True)
class Side:
    """One batch as the comparison reads it."""

    batch: str
    preset: str
    when: str  # its creation time, as shown
    state: str
    plan: BatchPlan
    records: tuple[RunRecord, ...]
    report: dict[str, Any]


def compare_batches(
    a: Side, b: Side, *, history: Mapping[str, Sequence[Point]] | None = None
) -> dict[str, Any]:
    """The comparison of A (older) and B (newer) as plain data (the `compare` templates');
    `history`: each of B's configurations measured in earlier batches on its host and stack."""
    if (a.plan.metric, a.plan.lower_is_better) != (b.plan.metric, b.plan.lower_is_better):
        raise UserError(
            f"{a.batch} and {b.batch} measure different things ({_metric_name(a.plan)} vs "
            f"{_metric_name(b.plan)}): nothing to compare"
        )
    metric = Metric(name=b.plan.metric, lower_is_better=b.plan.lower_is_better,
                    min_effect_pct=max(a.plan.min_effect_pct, b.plan.min_effect_pct))
    warnings = []
    if a.preset != b.preset:
        warnings.append(f"different presets ({a.preset} vs {b.preset}): approaches are "
                        "matched by name")
    if (different := loads_warning(a.report, b.report)) is not None:
        warnings.append(different)
    sampling = sampling_difference(a.records, b.records)
    if sampling["warning"] is not None:
        warnings.append(sampling["warning"])
    every = [_row(name, a, b, metric=metric, points=(history or {}).get(name, ()))
             for name in _names(a, b)]
    rows = [r for r in every if r["a"]["present"] or r["b"]["present"]]
    if (loads := same_loads(a.report, b.report)) is not None:
        for row in rows:  # both batches ran these levels: each row's, side by side
            if not (row["a"]["present"] and row["b"]["present"]):
                continue
            row["levels"] = level_rows(row["approach"], _at(a, row["approach"]),
                                       _at(b, row["approach"]), loads=loads, metric=metric)
    overrides = _changes(a.plan.overrides, b.plan.overrides)
    return {
        "a": _header(a), "b": _header(b), "metric": metric.name, "loads": loads,
        "lower_is_better": metric.lower_is_better, "min_effect_pct": metric.min_effect_pct,
        "warnings": warnings, "approaches": rows,
        "not_run": [r["approach"] for r in every if not (r["a"]["present"] or r["b"]["present"])],
        "moved": [r["approach"] for r in rows if r["beyond_noise"]],
        "moved_levels": moved_levels(rows),
        "fingerprint": fingerprint_changes(fingerprint_of(a.records), fingerprint_of(b.records)),
        **_knobs(a.plan, b.plan, ran={r["approach"] for r in rows},
                 overridden={o["knob"] for o in overrides}),
        "overrides": overrides, "sampling": sampling,
    }


def _knobs(a: BatchPlan, b: BatchPlan, *, ran: set[str], overridden: set[str]) -> dict[str, Any]:
    """`knobs` of the approaches that ran in either batch, and the `common_knobs` among them."""
    knobs = [k for k in knob_changes(a, b) if k["approach"] in ran]
    theirs = {c.approach for c in _configs(a)}
    both = [c.approach for c in _configs(b) if c.approach in ran and c.approach in theirs]
    common = common_knobs(knobs, both, overridden=overridden)
    keys = {_key(c) for c in common}
    return {"common_knobs": common, "knobs": [{**k, "common": _key(k) in keys} for k in knobs]}


def fingerprint_of(records: tuple[RunRecord, ...]) -> dict[str, Any]:
    """The batch's engine, host and stack: the baseline's fingerprint, else the first one
    recorded, with the engine that ran it first."""
    ordered = sorted(records, key=lambda r: r.role != "baseline")
    found = next((r for r in ordered if r.fingerprint), None)
    if found is None:
        return {}
    return {"engine": Stack.of(found.fingerprint, engine=found.engine).engine,
            **found.fingerprint}


def fingerprint_changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """The fingerprint keys whose values differ (a side that lacks one shows None)."""
    known = ("engine", *fingerprint_keys())
    keys = [*known, *sorted((set(a) | set(b)) - set(known))]
    return [{"key": k, "a": a.get(k), "b": b.get(k)} for k in keys
            if _text(a.get(k)) != _text(b.get(k))]


def knob_changes(a: BatchPlan, b: BatchPlan) -> list[dict[str, Any]]:
    """Resolved server_args and env that differ, per approach both plans run."""
    theirs = {c.approach: c for c in _configs(a)}
    out = []
    for ours in _configs(b):
        if (old := theirs.get(ours.approach)) is None:
            continue
        for kind in ("server_args", "env"):
            for change in _changes(getattr(old, kind), getattr(ours, kind),
                                   mask=kind == "env"):
                out.append({"approach": ours.approach, "kind": kind, **change})
    return out


def common_knobs(
    knobs: list[dict[str, Any]], approaches: list[str], *, overridden: set[str]
) -> list[dict[str, Any]]:
    """The knob changes shared by most of `approaches` (two at least, more than half): each
    once, with the approaches that lack it (`except`) and whether an override sets the knob."""
    shared: dict[tuple[str, str, str | None, str | None], list[dict[str, Any]]] = {}
    for k in knobs:
        shared.setdefault(_key(k), []).append(k)
    out = []
    for group in shared.values():
        names = {k["approach"] for k in group}
        if len(names) < 2 or len(names) * 2 <= len(approaches):
            continue
        first = group[0]
        out.append({"kind": first["kind"], "knob": first["knob"], "a": first["a"],
                    "b": first["b"], "except": [n for n in approaches if n not in names],
                    "override": first["knob"] in overridden})
    return out


def _key(change: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    return (change["kind"], change["knob"], _text(change["a"]), _text(change["b"]))


def _changes(
    a: Mapping[str, Any], b: Mapping[str, Any], *, mask: bool = False,
) -> list[dict[str, Any]]:
    out = []
    for knob in [*a, *(k for k in b if k not in a)]:
        old, new = a.get(knob), b.get(knob)
        if knob in a and knob in b and _text(old) == _text(new):
            continue
        if mask and is_secret_name(knob):
            old, new = (None if old is None else MASK), (None if new is None else MASK)
        out.append({"knob": knob, "a": old, "b": new})
    return out


def _row(name: str, a: Side, b: Side, *, metric: Metric,
         points: Sequence[Point]) -> dict[str, Any]:
    ours, theirs = _cell(b, name, metric.name), _cell(a, name, metric.name)
    change = beyond = spread = None
    a_samples, b_samples = theirs.pop("_samples"), ours.pop("_samples")
    if theirs["value"] is not None and ours["value"] is not None and theirs["value"] != 0:
        change = round((ours["value"] - theirs["value"]) / theirs["value"] * 100.0, 1)
        spread = judge_change(ours["value"], points=points, lower_is_better=metric.lower_is_better,
                              min_effect_pct=metric.min_effect_pct)
        if spread["state"] == "unconfirmed":
            verdict = compare(b_samples, a_samples, metric=metric, value=ours["value"],
                              delta=change)
            beyond = verdict.verdict in ("improved", "regressed")
        else:
            beyond = spread["state"] in ("improved", "regressed")
    return {
        "approach": name, "role": ours["role"] or theirs["role"], "a": theirs, "b": ours,
        "change_pct": change, "beyond_noise": bool(beyond),
        "direction": None if not beyond else _direction(change, metric, spread=spread),
        "spread": spread,
    }


def _at(side: Side, name: str) -> tuple[RunRecord | None, dict[str, Any]]:
    return next((r for r in side.records if r.approach == name), None), side.report


def _direction(change: float | None, metric: Metric, *,
               spread: Mapping[str, Any] | None = None) -> str:
    """better or worse: against the spread where it judged, else against A."""
    if spread is not None and spread["state"] in ("improved", "regressed"):
        return "better" if spread["state"] == "improved" else "worse"
    better = (change or 0) > 0 if not metric.lower_is_better else (change or 0) < 0
    return "better" if better else "worse"


def _cell(side: Side, name: str, metric: str) -> dict[str, Any]:
    record = next((r for r in side.records if r.approach == name), None)
    samples = record.samples(metric) if record is not None else []
    results = {r.get("approach"): r for r in side.report.get("results", [])}
    result = results.get(name) or {}
    role = record.role if record is not None else None
    if record is None and result:
        role = "approach"
    verdict = "baseline" if role == "baseline" else result.get("verdict")
    if record is None and not result:
        verdict = "absent"
    return {
        "present": record is not None or bool(result), "role": role, "verdict": verdict,
        "cause": result.get("cause"), "value": median(samples),
        "range": [min(samples), max(samples)] if samples else None, "n": len(samples),
        "status": record.status if record is not None else None, "_samples": samples,
    }


def _names(a: Side, b: Side) -> list[str]:
    """Every approach of either batch: B's order, then what only A ran."""
    names = [c.approach for side in (b, a) for c in _configs(side.plan)]
    names += [r.approach for side in (b, a) for r in side.records]
    return list(dict.fromkeys(names))


def _configs(plan: BatchPlan) -> tuple[RunConfig, ...]:
    return (*plan.configs, *plan.points)


def _header(side: Side) -> dict[str, Any]:
    return {"batch": side.batch, "preset": side.preset, "when": side.when, "state": side.state}


def _metric_name(plan: BatchPlan) -> str:
    return f"{plan.metric}, {'lower' if plan.lower_is_better else 'higher'} is better"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
