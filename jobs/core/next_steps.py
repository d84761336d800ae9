"""Ranked next steps (SPEC.md): retry the inconclusive, adopt the key achievement, remedy
each cause (low effort first), and accept the best measured configuration last."""

from __future__ import annotations

from typing import Any

from jobs.core.records import RunRecord
from jobs.core.remedies import EFFORTS, Remedies
from jobs.core.rules import PRECEDENCE
from jobs.core.verdicts import Metric, Verdict, median
from jobs.settings import is_secret_name

CAUSE_ORDER = (*PRECEDENCE, "timeout", "crash")


def cause_rank(cause: str) -> int:
    """A cause's place in SPEC.md's precedence (timeout and crash last)."""
    return CAUSE_ORDER.index(cause) if cause in CAUSE_ORDER else len(CAUSE_ORDER)



def next_steps(
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
    if verdict.reason == "fallback":
        return _step(
            "retry", record.approach,
            action=f"Re-run {record.approach} where its feature is supported (another GPU or "
            "SGLang release): the server fell back to the default path",
            why=verdict.why, effort="medium",
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
    for cause in sorted(by_cause, key=cause_rank):
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
