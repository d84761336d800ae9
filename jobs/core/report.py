"""The report: a batch's verdicts, key achievement, root cause and ranked next steps (SPEC.md).

`analyze` is a pure function from run records to a JSON-ready dict in SPEC.md's report format.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.errors import RecordError
from jobs.core.records import RunRecord
from jobs.core.remedies import EFFORTS, Remedies
from jobs.core.rules import PRECEDENCE, RuleSet
from jobs.core.verdicts import Metric, Verdict, change_pct, has_failed, judge, median
from jobs.settings import is_secret_name

CAUSE_ORDER = (*PRECEDENCE, "timeout", "crash")


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
) -> dict[str, Any]:
    """The report of a batch's records; `judged` holds verdicts already given, by approach (a
    worker judges each run as it ends), so that each approach is judged once."""
    baseline, approaches = split_batch(records)
    known = judged or {}
    verdicts = [
        known[r.approach] if r.approach in known else judge(r, baseline, metric=metric, rules=rules)
        for r in approaches
    ]
    base_value = median(baseline.samples(metric.name))
    values = {r.approach: v.value for r, v in zip(approaches, verdicts, strict=True)}
    values["baseline"] = base_value
    base_speculates = baseline.accept_length is not None
    results = [
        _result(
            record, verdict, metric=metric, values=values, base_value=base_value,
            base_speculates=base_speculates,
        )
        for record, verdict in zip(approaches, verdicts, strict=True)
    ]
    key = _key_achievement(results)
    root = _root_cause(approaches, verdicts, baseline=baseline)
    return {
        "batch": baseline.batch,
        "preset": baseline.preset,
        "metric": metric.name,
        "lower_is_better": metric.lower_is_better,
        "min_effect_pct": metric.min_effect_pct,
        "baseline": {
            "approach": baseline.approach,
            "value": base_value,
            "status": "failed" if has_failed(baseline, metric.name) else baseline.status,
        },
        "results": results,
        "key_achievement": key,
        "root_cause": root,
        "next_steps": _next_steps(
            approaches, verdicts, results=results, key=key, baseline=baseline,
            metric=metric, remedies=remedies,
        ),
        "fingerprint": baseline.fingerprint,
        "counts": dict(Counter(v.verdict for v in verdicts)),
    }


def _result(
    record: RunRecord,
    verdict: Verdict,
    *,
    metric: Metric,
    values: dict[str, float | None],
    base_value: float | None,
    base_speculates: bool,
) -> dict[str, Any]:
    return {
        "approach": record.approach,
        "verdict": verdict.verdict,
        "cause": verdict.cause,
        "value": verdict.value,
        "delta_pct": verdict.delta_pct,
        "why": verdict.why,
        "vs_parent": _vs_parent(record, verdict, metric=metric, values=values),
        "break_even": _break_even(
            record, verdict, metric=metric, base_value=base_value, base_speculates=base_speculates
        ),
        "hypothesis": record.hypothesis,
        "parent": record.parent,
        "samples": record.samples(metric.name),
        "accept_length": record.accept_length,
    }


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
) -> dict[str, float] | None:
    """One draft+verify cycle takes L/S now and must take at most L/B (ms, throughputs)."""
    accept = record.accept_length
    value = verdict.value
    if accept is None or base_speculates or metric.lower_is_better:
        return None
    if value is None or base_value is None or value <= 0 or base_value <= 0:
        return None
    return {
        "now_ms": round(accept / value * 1000.0, 1),
        "needed_ms": round(accept / base_value * 1000.0, 1),
    }


def _key_achievement(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    improved = [r for r in results if r["verdict"] == "improved"]
    if not improved:
        return None
    best = max(improved, key=lambda r: r["delta_pct"])
    return {"approach": best["approach"], "value": best["value"], "delta_pct": best["delta_pct"]}


def _root_cause(
    approaches: list[RunRecord], verdicts: list[Verdict], *, baseline: RunRecord
) -> dict[str, Any] | None:
    failed = [(r, v) for r, v in zip(approaches, verdicts, strict=True) if v.verdict == "failed"]
    counts = Counter(v.cause for _, v in failed if v.cause)
    if not counts:
        return None
    cause, count = min(counts.items(), key=lambda kv: (-kv[1], _cause_rank(kv[0])))
    if count < 2 or count * 2 < len(failed):
        return None
    names = [r.approach for r, v in failed if v.cause == cause]
    return {
        "cause": cause,
        "count": count,
        "of": len(failed),
        "approaches": names,
        "text": _root_text(cause, count=count, of=len(failed), names=names, baseline=baseline),
    }


def _cause_rank(cause: str) -> int:
    return CAUSE_ORDER.index(cause) if cause in CAUSE_ORDER else len(CAUSE_ORDER)


def _root_text(cause: str, *, count: int, of: int, names: list[str], baseline: RunRecord) -> str:
    fp = baseline.fingerprint
    gpu = fp.get("gpu") or "this GPU"
    lead = f"{count} of {of} failures share {cause} ({', '.join(names)})"
    if cause == "arch-unsupported":
        cc = fp.get("compute_capability")
        arch = f"compute capability {cc}" if cc else "this GPU's architecture"
        return (
            f"{lead}: {gpu} ({arch}) is too new for the kernels and architecture tables of "
            "these backends; the ecosystem has not caught up with the hardware"
        )
    if cause == "out-of-memory":
        return f"{lead}: the configurations do not fit the memory of {gpu}"
    if cause == "nccl-error":
        link = fp.get("interconnect") or "this interconnect"
        return f"{lead}: the collectives fail over {link} on {gpu}"
    if cause == "cuda-graph-incompatible":
        return f"{lead}: the changes are not safe to capture in CUDA graphs"
    return lead


def _next_steps(
    approaches: list[RunRecord],
    verdicts: list[Verdict],
    *,
    results: list[dict[str, Any]],
    key: dict[str, Any] | None,
    baseline: RunRecord,
    metric: Metric,
    remedies: Remedies,
) -> list[dict[str, Any]]:
    pairs = list(zip(approaches, verdicts, strict=True))
    steps: list[dict[str, Any]] = []
    if any(v.reason == "baseline" for _, v in pairs):
        steps.append(_step(
            "retry", None,
            action="Fix the baseline and re-run the whole batch",
            why="every comparison needs a baseline that ran: "
            + next(v.why for _, v in pairs if v.reason == "baseline"),
            effort="medium",
        ))
    for record, verdict in pairs:
        if verdict.verdict != "inconclusive" or verdict.reason == "baseline":
            continue
        steps.append(_retry(record, verdict, baseline=baseline))
    if key is not None:
        record = next(r for r in approaches if r.approach == key["approach"])
        knobs = _knob_text(record.change)
        steps.append(_step(
            "adopt", record.approach,
            action=f"Make {record.approach} the new baseline" + (f" ({knobs})" if knobs else ""),
            why=f"the largest improvement: {key['delta_pct']:+.1f}% on {metric.name}",
            effort="low",
        ))
    steps.extend(_remedy_steps(pairs, baseline=baseline, metric=metric, remedies=remedies))
    steps.append(_accept(results, key=key, baseline=baseline, metric=metric))
    for rank, step in enumerate(steps, start=1):
        step["rank"] = rank
    return steps


def _retry(record: RunRecord, verdict: Verdict, *, baseline: RunRecord) -> dict[str, Any]:
    if verdict.reason == "confound" and verdict.confound is not None:
        knob, ours, theirs = verdict.confound
        return _step(
            "retry", record.approach,
            action=f"Re-run {record.approach} with {knob} at the baseline's {theirs} "
            f"(it ran with {ours}): the confound removed",
            why=verdict.why, effort="low",
        )
    if verdict.reason == "drift":
        return _step(
            "retry", record.approach,
            action=f"Re-run {record.approach} and the baseline in one batch on one host and stack",
            why=verdict.why, effort="low",
        )
    return _step(
        "retry", record.approach,
        action=f"Re-run {record.approach} with more repetitions",
        why=verdict.why, effort="low",
    )


def _remedy_steps(
    pairs: list[tuple[RunRecord, Verdict]],
    *,
    baseline: RunRecord,
    metric: Metric,
    remedies: Remedies,
) -> list[dict[str, Any]]:
    fp = baseline.fingerprint
    found: list[tuple[int, int, dict[str, Any]]] = []
    by_cause: dict[str, list[str]] = {}
    for record, verdict in pairs:
        if verdict.verdict == "failed" and verdict.cause:
            by_cause.setdefault(verdict.cause, []).append(record.approach)
    for cause in sorted(by_cause, key=_cause_rank):
        names = by_cause[cause]
        for remedy in remedies.for_cause(cause):
            found.append((EFFORTS.index(remedy.effort), len(found), _remedy(
                remedy.action, remedy.why, remedy.effort, names=names, fp=fp, metric=metric,
                cause=cause,
            )))
    by_verdict: dict[tuple[str, bool], list[str]] = {}
    for record, verdict in pairs:
        speculative = record.accept_length is not None and baseline.accept_length is None
        by_verdict.setdefault((verdict.verdict, speculative), []).append(record.approach)
    for (verdict_name, speculative), names in by_verdict.items():
        for remedy in remedies.for_verdict(verdict_name, speculative=speculative):
            found.append((EFFORTS.index(remedy.effort), len(found), _remedy(
                remedy.action, remedy.why, remedy.effort, names=names, fp=fp, metric=metric,
                cause=None,
            )))
    return [step for _, _, step in sorted(found, key=lambda item: (item[0], item[1]))]


def _remedy(
    action: str,
    why: str,
    effort: str,
    *,
    names: list[str],
    fp: dict[str, Any],
    metric: Metric,
    cause: str | None,
) -> dict[str, Any]:
    fields = {
        "approaches": ", ".join(names),
        "compute_capability": fp.get("compute_capability") or "this GPU's",
        "gpu": fp.get("gpu") or "this GPU",
        "interconnect": fp.get("interconnect") or "this interconnect",
        "metric": metric.name,
    }
    step = _step(
        "remedy", ", ".join(names), action=action.format(**fields), why=why.format(**fields),
        effort=effort,
    )
    step["cause"] = cause
    return step


def _accept(
    results: list[dict[str, Any]],
    *,
    key: dict[str, Any] | None,
    baseline: RunRecord,
    metric: Metric,
) -> dict[str, Any]:
    if key is not None:
        best, value = key["approach"], key["value"]
    else:
        best, value = "baseline", median(baseline.samples(metric.name))
    shown = "no measurement" if value is None else f"{value:.4g} {metric.name}"
    return _step(
        "accept", best,
        action=f"Accept {best} ({shown}) as the best configuration for this hardware",
        why="stop optimising when the remaining options cost more than they promise",
        effort="low",
    )


def _knob_text(change: dict[str, dict[str, Any]]) -> str:
    parts = [f"{k}={v}" for k, v in change.get("server_args", {}).items()]
    parts += [
        f"{k}={'***' if is_secret_name(k) else v}" for k, v in change.get("env", {}).items()
    ]
    return ", ".join(parts)


def _step(kind: str, approach: str | None, *, action: str, why: str, effort: str) -> dict[str, Any]:
    return {
        "rank": 0, "kind": kind, "approach": approach, "action": action, "why": why,
        "effort": effort,
    }
