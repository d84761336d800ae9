"""The report: a batch's verdicts, key achievement, root cause and ranked next steps
(docs/contracts.md).

`analyze` is a pure function from run records to a JSON-ready dict in docs/contracts.md's report
format.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.advice._capacity_report import (
    baseline_capacity,
    capacity_key,
    capacity_section,
    has_capacity,
    result_capacity,
)
from jobs.core.advice._diagnosis import FlagFacts
from jobs.core.advice._next_steps import next_steps
from jobs.core.advice._remedies import Remedies
from jobs.core.advice._root_causes import root_cause
from jobs.core.engine_info import describe
from jobs.core.levels import add_levels, is_level_aware, key_achievement
from jobs.core.noise import Bracket, Spread, bracket_of
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.sampling import sampling_of
from jobs.core.stack import Stack
from jobs.core.verdicts import (
    Metric,
    Verdict,
    budget_sentence,
    change_pct,
    cycle_ms,
    has_failed,
    median,
    server_sentences,
    slower_sentence,
    twin_sentence,
    twins,
    unexplained_wins,
    with_comm,
)
from jobs.core.workloads import add_categories, has_categories, judge, synthetic_caveat
from jobs.errors import RecordError


def split_batch(records: Sequence[RunRecord]) -> tuple[RunRecord, list[RunRecord]]:
    """The baseline and the approaches, in order; a batch needs exactly one baseline."""
    baselines = [r for r in records if r.role == "baseline"]
    if not baselines:
        raise RecordError("the batch has no baseline record (role: baseline)")
    if len(baselines) > 1:
        raise RecordError(f"the batch has {len(baselines)} baseline records; it needs one")
    batches = {r.batch for r in records}
    if len(batches) > 1:
        raise RecordError(f"the records mix {len(batches)} batches: {', '.join(sorted(batches))}")
    return baselines[0], [r for r in records if r.role == "approach"]


def analyze(
    records: Sequence[RunRecord],
    *,
    metric: Metric,
    rules: RuleSet,
    remedies: Remedies,
    judged: Mapping[str, Verdict] | None = None,
    flags: FlagFacts | None = None,
    engine: str | None = None,
    ran: Mapping[str, Any] | None = None,
    history: Spread | None = None,
) -> dict[str, Any]:
    """The report of a batch's records; `judged` holds verdicts already given, by approach (a
    worker judges each run as it ends), so that each approach is judged once. `flags` (the engine's
    flag table) and `engine` (the plan's) let the remedies fit what the batch ran. `ran`: what the
    batch ran with (its `--set` overrides, reps, starts and bracket), shown in every format.
    `history`: the baseline's spread across earlier batches on its host and stack, a noise
    figure where a side has a single repetition."""
    baseline, approaches = split_batch(records)
    known = judged or {}
    verdicts = [
        known[r.approach] if r.approach in known
        else judge(r, baseline, metric=metric, rules=rules, history=history)
        for r in approaches
    ]
    base_value = median(baseline.samples(metric.name))
    values = {r.approach: v.value for r, v in zip(approaches, verdicts, strict=True)}
    values["baseline"] = base_value
    base_speculates = baseline.accept_length is not None
    others = {r.approach: r for r in records}
    measured_twins = twins(approaches, verdicts, baseline=baseline)
    unexplained = unexplained_wins(approaches, verdicts, baseline=baseline)
    results = [
        _result(
            record, verdict, metric=metric, values=values, base_value=base_value,
            base_speculates=base_speculates, others=others,
            said=[twin_sentence(verdict, twin) if (twin := measured_twins.get(record.approach))
                  else None, unexplained.get(record.approach)],
        )
        for record, verdict in zip(approaches, verdicts, strict=True)
    ]
    by_level = is_level_aware(records, metric)
    searched = has_capacity(records)  # docs/contracts.md "Capacity under the SLO"
    if searched:
        for result, record, verdict in zip(results, approaches, verdicts, strict=True):
            result["capacity"] = result_capacity(record, verdict, baseline=baseline,
                                                 metric=metric)
    key = key_achievement(approaches, verdicts, loads=any(r.by_load for r in records)) \
        if by_level else _key_achievement(results)
    if searched:
        key = capacity_key(results, key, records=records)
    root = root_cause(approaches, verdicts, baseline=baseline)
    report: dict[str, Any] = {
        "batch": baseline.batch,
        "preset": baseline.preset,
        "metric": metric.name,
        "lower_is_better": metric.lower_is_better,
        "min_effect_pct": metric.min_effect_pct,
        "baseline": {
            "approach": baseline.approach,
            "value": base_value,
            "status": "failed" if has_failed(baseline, metric.name) else baseline.status,
            "samples": baseline.samples(metric.name),
            **_bracketed(bracket_of(baseline, metric.name), metric=metric),
        },
        "results": results,
        "key_achievement": key,
        "root_cause": root,
        "next_steps": next_steps(
            approaches, verdicts, key=key, baseline=baseline, metric=metric,
            remedies=remedies, rules=rules, flags=flags, engine=engine,
            settled=frozenset(measured_twins), unexplained=frozenset(unexplained),
            capacity={r["approach"]: r["capacity"] for r in results if r.get("capacity")},
        ),
        "fingerprint": baseline.fingerprint,
        "engine": engine_of_batch(baseline, engine),
        "counts": dict(Counter(v.verdict for v in verdicts)),
    }
    if ran is not None:
        report["overrides"] = dict(ran.get("overrides") or {})
        report["ran"] = {k: v for k, v in ran.items() if k != "overrides"}
    if (sampling := sampling_of(records)) is not None:  # what its requests were sampled with
        report["sampling"] = sampling
    if by_level:
        add_levels(report, records=records, baseline=baseline, verdicts=verdicts, metric=metric)
    if has_categories(records):  # docs/contracts.md "Workloads that represent the traffic"
        add_categories(report, records=records, baseline=baseline, verdicts=verdicts,
                       metric=metric)
    if searched:
        report["capacity"] = capacity_section(records, metric=metric)
        report["baseline"]["capacity"] = baseline_capacity(baseline, metric=metric)
    return report


def _bracketed(bracket: Bracket | None, *, metric: Metric) -> dict[str, Any]:
    """The baseline's keys of a bracketed batch (docs/contracts.md "Noise, measured"): both
    runs' medians, the drift, every sample of both (its range), and `drift` in words when the
    host drifted beyond noise; nothing for a batch that was not bracketed."""
    if bracket is None:
        return {}
    drift = bracket.drift_pct
    out: dict[str, Any] = {"bracket": list(bracket.medians),
                           "drift_pct": None if drift is None else round(drift, 1),
                           "samples": list(bracket.samples), "bracket_status": bracket.status}
    if drift is not None and bracket.is_beyond(metric.min_effect_pct):
        margin = abs(drift) + metric.min_effect_pct
        out["drift"] = (f"the host drifted {drift:+.1f}% during the batch (the baseline's first "
                        f"and last runs): a change within ±{margin:.1f}% is inconclusive")
    return out


def _result(
    record: RunRecord,
    verdict: Verdict,
    *,
    metric: Metric,
    values: dict[str, float | None],
    base_value: float | None,
    base_speculates: bool,
    others: Mapping[str, RunRecord],
    said: Sequence[str | None] = (),
) -> dict[str, Any]:
    """One result; `said`: what the report adds to its why (a twin measured without its
    confound, a win its hypothesis does not explain), after the caveat of speculation measured
    on synthetic prompts (docs/contracts.md "Workloads that represent the traffic")."""
    even = with_comm(_break_even(record, verdict, metric=metric, base_value=base_value,
                                 base_speculates=base_speculates), record)
    caveat = synthetic_caveat(record, verdict)
    said = [caveat, *said]
    if any(said):
        verdict = dataclasses.replace(verdict, why="; ".join([verdict.why, *filter(None, said)]))
    return {
        "approach": record.approach,
        "verdict": verdict.verdict,
        "cause": verdict.cause,
        "value": verdict.value,
        "delta_pct": verdict.delta_pct,
        "why": _why(verdict, record, even, others),
        "vs_parent": _vs_parent(record, verdict, metric=metric, values=values),
        "break_even": even,
        "hypothesis": record.hypothesis,
        "parent": record.parent,
        "samples": record.samples(metric.name),
        "accept_length": record.accept_length,
        **({"caveat": caveat} if caveat else {}),
    }


def _why(verdict: Verdict, record: RunRecord, even: dict[str, Any] | None,
         others: Mapping[str, RunRecord]) -> str:
    """The verdict's why, with the evidence of a measured run: how much of its cycle the
    all-reduces take, an all-reduce slower than its parent's, and what the engine's own metrics
    say (a full KV cache, a fallen acceptance) (docs/contracts.md "Evidence for the why")."""
    quoted = server_sentences(record, verdict, others)
    if verdict.value is None:
        return "; ".join([verdict.why, *quoted])
    said = [budget_sentence(even, record) if even else None, slower_sentence(record, others)]
    return "; ".join([verdict.why, *(s for s in said if s), *quoted])


def _vs_parent(
    record: RunRecord, verdict: Verdict, *, metric: Metric, values: dict[str, float | None]
) -> dict[str, Any] | None:
    parent_value = values.get(record.parent) if record.parent else None
    if parent_value is None or verdict.value is None:
        return None
    delta = change_pct(verdict.value, parent_value, lower_is_better=metric.lower_is_better)
    if delta is None:
        return None
    return {"approach": record.parent, "delta_pct": round(delta, 1)}


def _break_even(
    record: RunRecord,
    verdict: Verdict,
    *,
    metric: Metric,
    base_value: float | None,
    base_speculates: bool,
) -> dict[str, Any] | None:
    """One draft+verify cycle takes L/S now and must take at most L/B (ms, throughputs)."""
    accept = record.accept_length
    value = verdict.value
    if accept is None or base_speculates or metric.lower_is_better:
        return None
    if value is None or base_value is None or value <= 0 or base_value <= 0:
        return None
    return {"now_ms": cycle_ms(accept, value), "needed_ms": cycle_ms(accept, base_value)}


def _key_achievement(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    improved = [r for r in results if r["verdict"] == "improved" and r["delta_pct"] is not None]
    if not improved:
        return None
    best = max(improved, key=lambda r: r["delta_pct"])
    return {"approach": best["approach"], "value": best["value"], "delta_pct": best["delta_pct"]}


def engine_of_batch(baseline: RunRecord, engine: str | None) -> dict[str, Any]:
    """The engine that ran the batch, as the report names it: its name, title and version."""
    stack = Stack.of(baseline.fingerprint, engine=engine or baseline.engine)
    return {"name": stack.engine, "title": describe(stack.engine).title,
            "version": stack.version}

