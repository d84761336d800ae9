"""The digest's regressions between consecutive experiments of a preset, pure.

Absolute values are never compared across batches (docs/contracts.md), except those of one
configuration on one host and stack, where nothing but time differs. So a regression is one of:

- **baseline**: the baseline's value against the earlier experiments of the preset whose
  baseline ran the same configuration (resolved server_args and env, bench settings, metric) on
  the same host (worker) and stack (docs/contracts.md "Noise, measured"): with 3 or more of them,
  a regression beyond their spread (`jobs.core.noise.judge_change`; within it, none); with
  fewer, a regression beyond its noise against the latest of them by the verdict rules (at least
  the later plan's min_effect_pct, and with 2+ repetitions on both sides, disjoint ranges),
  named unconfirmed;
- **best**: the earlier experiment's best judged approach (largest delta against its own
  baseline), judged again by the next experiment of the preset with a worse verdict (improved →
  unchanged or regressed, unchanged → regressed): the effect itself moved. Its deltas are each
  against their own batch's baseline, so they compare across stacks and overrides; the stack
  change and every `--set` override that differs are named with it. With load levels, a best
  judged next time as **mixed** (improved at some levels, regressed at others) is no plain
  regression: it is named with its verdict and crossover ("→ mixed: improved up to
  max-concurrency 4, regressed from 16"), no delta set against the earlier one.

A sweep and its confirmation are one experiment (`jobs.core.digest`): its judged results are
the sweep's own approaches' and its confirmed winner's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.digest._digest_memory import judged_results, stack_change, sweep_points
from jobs.core.digest._experiments import Experiment, experiments
from jobs.core.memory import config_key, stack_key
from jobs.core.noise import Point, judge_change
from jobs.core.plans import BatchRow
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, change_pct, compare, median

RANK = {"regressed": 0, "unchanged": 1, "improved": 2}
Judgements = dict[str, tuple[str, float, float | None]]


def regressions(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    since: dt.datetime,
    now: dt.datetime,
) -> list[dict[str, Any]]:
    """The window's regressions (the later experiment in the window, the earlier possibly
    before it), per preset: baselines first, then judged bests, each oldest first."""
    ordered = sorted((r for r in rows if r.created_at <= now), key=lambda r: (r.created_at, r.id))
    by_preset: dict[str, list[Experiment]] = {}
    for exp in experiments(ordered):
        by_preset.setdefault(exp.row.preset, []).append(exp)
    out: list[dict[str, Any]] = []
    for preset in sorted(by_preset):
        out.extend(_baselines(by_preset[preset], records, since=since))
        out.extend(_bests(by_preset[preset], records, since=since))
    return out


def _baselines(
    exps: Sequence[Experiment], records: Mapping[str, Sequence[RunRecord]], *, since: dt.datetime
) -> list[dict[str, Any]]:
    held: dict[tuple[str, ...], list[tuple[BatchRow, RunRecord]]] = {}
    out = []
    for exp in exps:
        row = exp.row
        record = _baseline_of(row, records.get(row.id, ()))
        if record is None:
            continue
        earlier = held.setdefault(_identity(row, record), [])
        if earlier and row.created_at >= since:
            moved = _value_regressed(earlier, (row, record))
            if moved is not None:
                out.append(moved)
        earlier.append((row, record))
    return out


def _identity(row: BatchRow, record: RunRecord) -> tuple[str, ...]:
    """One configuration on one host and stack, measured the same way."""
    plan = row.plan
    return (config_key(record.server_args, record.env),
            stack_key(record.fingerprint, engine=record.engine),
            str(row.host), config_key(plan.bench, {}), plan.metric, str(plan.lower_is_better))


def _baseline_of(row: BatchRow, records: Sequence[RunRecord]) -> RunRecord | None:
    metric = row.plan.metric
    return next((r for r in records if r.role == "baseline" and r.status == "ok"
                 and r.samples(metric)), None)


def _value_regressed(
    before: Sequence[tuple[BatchRow, RunRecord]], after: tuple[BatchRow, RunRecord]
) -> dict[str, Any] | None:
    """The baseline's move against its earlier batches (oldest first), or None."""
    (old_row, old), (new_row, new) = before[-1], after
    plan = new_row.plan
    samples, base = new.samples(plan.metric), old.samples(plan.metric)
    value, base_value = median(samples), median(base)
    assert value is not None and base_value is not None
    raw = change_pct(value, base_value, lower_is_better=plan.lower_is_better)
    metric = Metric(name=plan.metric, min_effect_pct=plan.min_effect_pct,
                    lower_is_better=plan.lower_is_better)
    delta = None if raw is None else round(raw, 1)
    spread = judge_change(value, points=[_point(r, record, plan.metric) for r, record in before],
                          lower_is_better=plan.lower_is_better,
                          min_effect_pct=plan.min_effect_pct)
    if spread["state"] == "unconfirmed":
        if compare(samples, base, metric=metric, value=value, delta=delta).verdict != "regressed":
            return None
    elif spread["state"] != "regressed":
        return None  # within its usual spread: never a regression
    return {
        "preset": new_row.preset, "what": "baseline", "metric": plan.metric, "delta_pct": delta,
        "from": {"batch": old_row.id, "approach": old.approach, "value": base_value},
        "to": {"batch": new_row.id, "approach": new.approach, "value": value},
        "same": f"the same configuration on the same host and stack: {spread['text']}",
        "spread": spread, "stack": [], "overrides": [],
    }


def _point(row: BatchRow, record: RunRecord, metric: str) -> Point:
    samples = record.samples(metric)
    return Point(batch=row.id, value=median(samples) or 0.0, low=min(samples),
                 high=max(samples))


def judged_of(exp: Experiment) -> Judgements:
    """The experiment's judged results: its own approaches' (never a sweep's points) and, for
    a sweep, its confirmed winner's (the confirmation's verdict)."""
    out = judged_results(exp.row.report, points=sweep_points(exp.row))
    if exp.confirmation is not None:
        out.update(judged_results(exp.confirmation.report))
    return out


def _bests(
    exps: Sequence[Experiment], records: Mapping[str, Sequence[RunRecord]], *, since: dt.datetime
) -> list[dict[str, Any]]:
    held: tuple[Experiment, Judgements] | None = None
    out = []
    for exp in exps:
        now_judged = judged_of(exp)
        if held is not None and exp.row.created_at >= since:
            moved = _effect_regressed(held, (exp, now_judged), records)
            if moved is not None:
                out.append(moved)
                if moved["to"]["verdict"] == "mixed" and not now_judged:
                    held = None  # named once: a later judged experiment starts anew
        if now_judged:
            held = (exp, now_judged)
    return out


def _mixed_of(exp: Experiment) -> dict[str, dict[str, Any]]:
    """The experiment's mixed results by approach (its confirmation's for a sweep)."""
    reports = [exp.row.report, exp.confirmation.report if exp.confirmation else None]
    points = sweep_points(exp.row)
    return {str(res.get("approach")): res for report in reports
            for res in (report or {}).get("results") or []
            if res.get("verdict") == "mixed" and res.get("approach") not in points}


def _effect_regressed(
    before: tuple[Experiment, Judgements],
    after: tuple[Experiment, Judgements],
    records: Mapping[str, Sequence[RunRecord]],
) -> dict[str, Any] | None:
    (old_exp, old), (new_exp, new) = before, after
    old_plan, plan = old_exp.row.plan, new_exp.row.plan
    if (old_plan.metric, old_plan.lower_is_better) != (plan.metric, plan.lower_is_better):
        return None  # a different yardstick: no move to judge
    name = max(old, key=lambda n: old[n][1])  # the first of a tie, in report order
    mixed = _mixed_of(new_exp).get(name) if old[name][0] == "improved" else None
    change: float | None = None
    if mixed is not None:
        crossover = (mixed.get("crossover") or {}).get("text")
        now, now_delta, now_value = "mixed", mixed.get("delta_pct"), mixed.get("value")
    elif name not in new or RANK[new[name][0]] >= RANK[old[name][0]]:
        return None
    else:
        (now, now_delta, now_value), crossover = new[name], None
        change = round(new[name][1] - old[name][1], 1)
    was, was_delta, was_value = old[name]
    return {
        "preset": new_exp.row.preset, "what": "best", "metric": plan.metric,
        "approach": name, "change_pp": change,
        "from": {"batch": old_exp.row.id, "approach": name, "verdict": was,
                 "delta_pct": was_delta, "value": was_value},
        "to": {"batch": new_exp.row.id, "approach": name, "verdict": now,
               "delta_pct": now_delta, "value": now_value, "crossover": crossover},
        "stack": stack_change(_fingerprint(old_exp.row, records),
                              _fingerprint(new_exp.row, records)),
        "overrides": override_changes(old_plan.overrides, plan.overrides),
    }


def _fingerprint(row: BatchRow, records: Mapping[str, Sequence[RunRecord]]) -> dict[str, Any]:
    ordered = sorted(records.get(row.id, ()), key=lambda r: r.role != "baseline")
    return next((dict(r.fingerprint) for r in ordered if r.fingerprint), {})


def override_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every `--set` override that differs between two batches (None: not set)."""
    keys = [*old, *(k for k in new if k not in old)]
    return [{"knob": k, "from": old.get(k), "to": new.get(k)} for k in keys
            if str(old.get(k)) != str(new.get(k)) or (k in old) != (k in new)]
