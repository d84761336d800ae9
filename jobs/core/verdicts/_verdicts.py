"""Verdicts: what one approach did against the batch's baseline (docs/contracts.md's verdict rules).

Pure functions over run records. The order of the rules is the order of the checks below:
cancelled/skipped, failed, inconclusive (failed baseline, confound, fingerprint drift, a fallback
from the declared change, noise), then the comparison of medians.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
from dataclasses import dataclass
from typing import Any

from jobs.core.capacity import CAPACITY, capacity_of, closing_capacity, judge_capacity
from jobs.core.deltas import change_pct as change_pct  # re-exported: where callers look
from jobs.core.deltas import is_better as is_better
from jobs.core.memory import reopened_by
from jobs.core.noise import Noise, Spread, noise_of
from jobs.core.plans import confounds
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, cause_of, fallback_line
from jobs.core.stack import DRIFT_KEYS, Stack
from jobs.redaction import redact, secret_values

VERDICTS = (
    "improved", "regressed", "mixed", "unchanged", "inconclusive", "failed", "cancelled",
    "skipped",
)


@dataclass(frozen=True)
class Metric:
    """How a batch is judged: the metric, its direction and the smallest effect that counts."""

    name: str = "output_throughput"
    min_effect_pct: float = 2.0
    lower_is_better: bool = False
    # docs/contracts.md's `slo`: upper limits on benchmark result keys, as (key, limit) pairs
    slo: tuple[tuple[str, float], ...] = ()
    # the requests each benchmark run sends: what a tail percentile rests on (None: unknown)
    requests: int | None = None

    @property
    def limits(self) -> dict[str, float]:
        return dict(self.slo)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    cause: str | None
    value: float | None
    delta_pct: float | None
    why: str
    # Why an inconclusive verdict is inconclusive: baseline | confound | drift (the stack) |
    # fallback | noise | host-drift (the host drifted during the batch) | one-rep (a single
    # repetition and no noise figure) | slo (both sides break a limit).
    reason: str | None = None
    confound: tuple[str, str, str] | None = None
    # The verdict at each load level (the report's `by_load` entries; jobs.core.levels).
    levels: tuple[dict[str, Any], ...] = ()
    # The verdict on each category of a workload (the report's `by_category` entries;
    # jobs.core.workloads).
    categories: tuple[dict[str, Any], ...] = ()


def median(samples: list[float]) -> float | None:
    return float(statistics.median(samples)) if samples else None


def has_failed(record: RunRecord, metric: str) -> bool:
    """Whether a run failed or produced no value of the metric; a capacity search that ran
    has a result even when it found no capacity (even `from` broke the SLO)."""
    if metric == CAPACITY:
        return record.status in ("failed", "timeout") or capacity_of(record) is None
    return record.status in ("failed", "timeout") or not record.samples(metric)


def judge(
    record: RunRecord, baseline: RunRecord, *, metric: Metric, rules: RuleSet,
    history: Spread | None = None,
) -> Verdict:
    """The verdict of one approach against the baseline at one operating point (a batch with
    load levels or an SLO is judged by jobs.core.levels, level by level, with these rules);
    `history`: the baseline's spread across earlier batches, a noise figure for one repetition."""
    return remembered(record, judge_point(record, baseline, metric=metric, rules=rules,
                                          history=history))


def remembered(record: RunRecord, verdict: Verdict) -> Verdict:
    """A known dead end's `why` begins `known from <batch>` and ends with what re-opens it, a
    re-opened one's ends with what failed before (jobs.core.memory)."""
    known = record.extra.get("known_from")
    if isinstance(known, str) and known and verdict.verdict == "failed":
        verdict = dataclasses.replace(
            verdict, why=f"known from {known}: {verdict.why}; {reopened_by(record)}")
    reopened = record.extra.get("reopened")
    if isinstance(reopened, str) and reopened:
        verdict = dataclasses.replace(verdict, why=f"{verdict.why}; {reopened}")
    return verdict


def judge_point(
    record: RunRecord, baseline: RunRecord, *, metric: Metric, rules: RuleSet,
    history: Spread | None = None,
) -> Verdict:
    """docs/contracts.md's verdict rules, in their order, for one operating point of two runs,
    against the noise the baseline measured (jobs.core.noise)."""
    samples = record.samples(metric.name)
    value = median(samples)
    if record.status in ("cancelled", "skipped"):
        why = (
            "stopped by a cancel before it finished"
            if record.status == "cancelled"
            else "never started: the batch was cancelled"
        )
        return Verdict(record.status, None, value, None, why)
    if has_failed(record, metric.name):
        return _failed(record, metric=metric, rules=rules)

    base_samples = baseline.samples(metric.name)
    base_value = median(base_samples)
    delta = None
    if base_value is not None and value is not None:
        raw = change_pct(value, base_value, lower_is_better=metric.lower_is_better)
        delta = None if raw is None else round(raw, 1)

    if has_failed(baseline, metric.name) or (base_value is None and metric.name != CAPACITY):
        problem = _baseline_problem(baseline, metric.name)
        why = f"the baseline failed ({problem}): nothing to compare"
        return Verdict("inconclusive", None, value, delta, why, reason="baseline")
    found = confounds(
        server_args=record.server_args, env=record.env, change=record.change,
        base_args=baseline.server_args, base_env=baseline.env,
    )
    if found:
        knob, ours, theirs = found[0]
        others = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        why = (
            f"{knob} differs from the baseline ({ours} vs {theirs}) but is not the declared "
            f"change{others}: the confound, not the hypothesis, may explain the result"
        )
        return Verdict(
            "inconclusive", None, value, delta, why, reason="confound", confound=found[0]
        )
    drift = fingerprint_drift(record.fingerprint, baseline.fingerprint)
    if drift:
        key, ours, theirs = drift
        why = f"ran on a different {key} than the baseline ({ours} vs {theirs})"
        return Verdict("inconclusive", None, value, delta, why, reason="drift")
    fell_back = fallback_line(log_tail=record.log_tail, lines=record.extra.get("fallbacks"),
                              change=record.change, rules=rules)
    if fell_back is not None:
        why = f"the server fell back from the declared change: “{_clip(fell_back)}”"
        return Verdict("inconclusive", None, value, delta, why, reason="fallback")
    if metric.name == CAPACITY:
        return _capacity(record, baseline, metric=metric)
    assert value is not None
    noise = noise_of(baseline, metric=metric.name, min_effect_pct=metric.min_effect_pct,
                     history=history)
    return compare(samples, base_samples, metric=metric, value=value, delta=delta, noise=noise)


def compare(
    samples: list[float],
    base_samples: list[float],
    *,
    metric: Metric,
    value: float,
    delta: float | None,
    noise: Noise | None = None,
) -> Verdict:
    """Rule 4 with the noise measured (docs/contracts.md "Noise, measured"): the medians'
    relative change; a change within the host's drift; the overlap of the [min, max] ranges
    (the baseline's widened by its closing bracket); a single repetition decides only against
    a noise figure."""
    noise = noise or Noise()
    base_value = median(base_samples)
    assert base_value is not None
    raw = change_pct(value, base_value, lower_is_better=metric.lower_is_better)
    if raw is None:
        return Verdict(
            "inconclusive", None, value, None, "the baseline's value is 0: no relative change",
            reason="noise",
        )
    # Rounded so that scaling every value by a constant cannot flip a verdict on a float ulp.
    decisive = round(raw, 6)
    shown = f"{delta:+.1f}%"
    unit = f"{_fmt(value)} vs {_fmt(base_value)}"
    if abs(decisive) < metric.min_effect_pct:
        why = f"{shown} ({unit}) is below the {metric.min_effect_pct:g}% minimum effect"
        return Verdict("unchanged", None, value, delta, why)
    if decisive == 0:  # neither positive nor negative, even with a minimum effect of 0
        return Verdict("unchanged", None, value, delta, f"{shown} ({unit}): no change")
    drift = noise.drift_pct
    if drift is not None and abs(decisive) <= abs(round(drift, 6)) + metric.min_effect_pct:
        why = (f"{shown} ({unit}) is within the host's drift: the baseline moved {drift:+.1f}% "
               f"between its first and last runs, and a change must exceed that plus the "
               f"{metric.min_effect_pct:g}% minimum effect")
        return Verdict("inconclusive", None, value, delta, why, reason="host-drift")
    theirs = [*base_samples, *noise.base_extra]
    if len(samples) >= 2 and len(theirs) >= 2:
        lo, hi = min(samples), max(samples)
        base_lo, base_hi = min(theirs), max(theirs)
        if not (hi < base_lo or lo > base_hi):
            why = (
                f"{shown} but the ranges overlap ([{_fmt(lo)}, {_fmt(hi)}] vs "
                f"[{_fmt(base_lo)}, {_fmt(base_hi)}]): too noisy, more repetitions needed"
            )
            return Verdict("inconclusive", None, value, delta, why, reason="noise")
        verdict = "improved" if decisive > 0 else "regressed"
        return Verdict(verdict, None, value, delta, f"{shown} ({unit})")
    if noise.figure_pct is None:
        why = f"{shown} ({unit}) from one repetition: no noise estimate"
        return Verdict("inconclusive", None, value, delta, why, reason="one-rep")
    figure = f"the {noise.figure_pct:.1f}% {noise.figure_from}"
    if abs(decisive) <= round(noise.figure_pct, 6):
        why = f"{shown} ({unit}) from one repetition is within {figure}: too noisy to tell"
        return Verdict("inconclusive", None, value, delta, why, reason="noise")
    verdict = "improved" if decisive > 0 else "regressed"
    return Verdict(verdict, None, value, delta,
                   f"{shown} ({unit}) from one repetition, beyond {figure}")


def _capacity(record: RunRecord, baseline: RunRecord, *, metric: Metric) -> Verdict:
    """`metric: capacity`: the capacity's own rule (jobs.core.capacity) instead of rule 4."""
    ours = capacity_of(record)
    assert ours is not None
    found = judge_capacity(ours, capacity_of(baseline), name=record.approach,
                           min_effect_pct=metric.min_effect_pct, slo=metric.limits,
                           closing=closing_capacity(baseline))
    return Verdict(found.verdict, None, found.value, found.delta_pct, found.why,
                   reason="capacity" if found.verdict == "inconclusive" else None)


def fingerprint_drift(
    ours: dict[str, Any], theirs: dict[str, Any]
) -> tuple[str, str, str] | None:
    """The first stack component both sides know and that differs, with both values."""
    for key, a, b in Stack.of(ours).changes(Stack.of(theirs), DRIFT_KEYS):
        if a is not None and b is not None:
            return key, str(a), str(b)
    return None


def _failed(record: RunRecord, *, metric: Metric, rules: RuleSet) -> Verdict:
    tag, line = cause_of(log_tail=record.log_tail, status=record.status, rules=rules,
                         exit_code=record.exit_code)
    # The process's secrets and the run's own, quoted from its log, never reach the report.
    line = redact(line, secrets=secret_values(os.environ, record.env))
    if record.status == "ok" and tag == "crash":
        why = f"no repetition produced {metric.name}{_no_sample_note(record)}"
    elif record.status == "timeout" and tag == "timeout":
        why = f"timed out: {line}" if line else "timed out"
    else:
        why = f"{rules.explain(tag)}: “{_clip(line)}”" if line else rules.explain(tag)
    return Verdict("failed", tag, None, None, why)


def _no_sample_note(record: RunRecord) -> str:
    """Why the repetitions that ran are no samples, as the engine recorded it ("completed 60
    of 64"), in parentheses; empty when it did not say."""
    reps = record.extra.get("repetitions")
    notes = [
        f"repetition {rep.get('rep')}: {rep['why']}"
        for rep in (reps if isinstance(reps, list) else [])
        if isinstance(rep, dict) and rep.get("why")
    ]
    return f" ({'; '.join(notes)})" if notes else ""


def _baseline_problem(baseline: RunRecord, metric: str) -> str:
    if baseline.status in ("failed", "timeout"):
        return baseline.status
    if not baseline.samples(metric):
        return f"no {metric}"
    return baseline.status


_LOG_PREFIX = re.compile(r"^\[[^\]]*\d{2}:\d{2}:\d{2}[^\]]*\]\s*")


def _clip(text: str, limit: int = 160) -> str:
    """One line of evidence: the log's timestamp prefix dropped, long lines cut."""
    text = _LOG_PREFIX.sub("", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def failure_cause(record: RunRecord, *, metric: Metric, rules: RuleSet) -> str | None:
    """The cause the failure rules give a failed record (None when it did not fail)."""
    return _failed(record, metric=metric, rules=rules).cause if has_failed(record, metric.name) \
        else None
