"""Ranked next steps (docs/contracts.md): retry the inconclusive, adopt the key achievement and each
mixed result up to its crossover (jobs.core.advice), remedy each cause (low effort first), measure
speculation on a workload where it was measured on random token ids, and accept the best measured
configuration last.

Remedies are chosen by what each approach ran (jobs.core.advice: the engine, its GPUs, the
flag the engine rejected); `accept` names a configuration that was measured, or is left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jobs.core.advice._diagnosis import FlagFacts, FlagProblem, engine_of, facts_of, flag_problem
from jobs.core.advice._next_steps_adopt import adopt_steps, make_step
from jobs.core.advice._remedies import EFFORTS, Facts, Remedies, Remedy
from jobs.core.capacity import CAPACITY
from jobs.core.engine_info import describe
from jobs.core.plans import load_label
from jobs.core.records import RunRecord
from jobs.core.rules import PRECEDENCE, RuleSet
from jobs.core.stack import Stack
from jobs.core.units import unit_of, with_unit
from jobs.core.verdicts import Metric, Verdict, comm_of, median
from jobs.core.workloads import workload_steps, workload_variants

CAUSE_ORDER = (*PRECEDENCE, "timeout", "crash")
NOT_RUN = ("cancelled", "skipped")
_MARK = "\x00approaches\x00"  # where the approaches go once the steps alike are merged
_EVIDENCE_CHARS = 240


def cause_rank(cause: str) -> int:
    """A cause's place in docs/contracts.md's precedence (timeout and crash last)."""
    return CAUSE_ORDER.index(cause) if cause in CAUSE_ORDER else len(CAUSE_ORDER)


def next_steps(
    approaches: list[RunRecord],
    verdicts: list[Verdict],
    *,
    key: dict[str, Any] | None,
    baseline: RunRecord,
    metric: Metric,
    remedies: Remedies,
    rules: RuleSet,
    flags: FlagFacts | None = None,
    engine: str | None = None,
    settled: frozenset[str] = frozenset(),
    unexplained: frozenset[str] = frozenset(),
    capacity: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """`flags`: what is known of the engine's flags across releases; `engine`: the engine the
    batch ran (the plan's), else told from the baseline; `settled`: confounded approaches whose
    retry the batch already measured (jobs.core.verdicts): no retry step for them; `unexplained`:
    wins their hypothesis does not explain (jobs.core.verdicts): adopted once confirmed at the
    loads that matter."""
    pairs = list(zip(approaches, verdicts, strict=True))
    ran = engine or engine_of(baseline.fingerprint, named=baseline.engine)
    steps: list[dict[str, Any]] = _rerun_steps(
        [(r, v) for r, v in pairs if r.approach not in settled], baseline=baseline)
    steps.extend(adopt_steps(approaches, verdicts, key=key, metric=metric,
                             unexplained=unexplained, capacity=capacity))
    steps.extend(_remedy_steps(
        pairs, baseline=baseline, metric=metric, remedies=remedies, rules=rules, flags=flags,
        engine=ran,
    ))
    # docs/contracts.md "Workloads that represent the traffic": speculation measured on random
    # token ids is measured again on prompts that represent the traffic
    steps.extend(workload_steps(approaches, verdicts, variants=workload_variants(baseline.preset)))
    accept = _accept(pairs, steps, key=key, baseline=baseline, metric=metric)
    if accept is not None:
        steps.append(accept)
    for rank, step in enumerate(steps, start=1):
        step["rank"] = rank
    return steps


def _rerun_steps(
    pairs: list[tuple[RunRecord, Verdict]], *, baseline: RunRecord
) -> list[dict[str, Any]]:
    """Retry steps: a failed or unrun baseline, the inconclusive, what a cancel left unrun."""
    steps: list[dict[str, Any]] = []
    if baseline.status in NOT_RUN:
        steps.append(make_step(
            "retry", None, action="Run the whole batch again",
            why=f"it was {baseline.status} before its baseline was measured: nothing was compared",
            effort="low",
        ))
        return steps
    if any(v.reason == "baseline" for _, v in pairs):
        steps.append(make_step(
            "retry", None,
            action="Fix the baseline and re-run the whole batch",
            why="every comparison needs a baseline that ran: "
            + next(v.why for _, v in pairs if v.reason == "baseline"),
            effort="medium",
        ))
    for record, verdict in pairs:
        if verdict.verdict != "inconclusive" or verdict.reason in ("baseline", "slo"):
            continue  # a failed baseline is retried above; both breaking the SLO is no retry
        steps.append(_retry(record, verdict))
    unrun = [r for r, v in pairs if v.verdict in NOT_RUN]
    if unrun:
        names = ", ".join(r.approach for r in unrun)
        steps.append(make_step(
            "retry", names,
            action=f"Run {_with_parents(unrun)} again with the baseline",
            why=f"the batch ended before {'it was' if len(unrun) == 1 else 'they were'} "
            f"measured ({', '.join(sorted({r.status for r in unrun}))})",
            effort="low",
        ))
    return steps


def _retry(record: RunRecord, verdict: Verdict) -> dict[str, Any]:
    action, effort = _retry_action(record, verdict, name=_with_parents([record]))
    return make_step("retry", record.approach, action=action, why=verdict.why, effort=effort)


_RETRY_ACTIONS = {  # why a result was inconclusive -> what its re-run changes
    "one-rep": "with --reps 3: one repetition is no noise estimate",
    "host-drift": "when the host is quiet, or with `starts: 2` so that its range holds the "
                  "host's noise",
    "drift": "and the baseline in one batch on one host and stack",
}


def _retry_action(record: RunRecord, verdict: Verdict, *, name: str) -> tuple[str, str]:
    """A retry's action, by the reason its result was inconclusive, and its effort."""
    if verdict.reason == "confound" and verdict.confound is not None:
        knob, ours, theirs = verdict.confound
        return (f"Re-run {name} with {knob} at the baseline's {theirs} (it ran with {ours}): "
                "the confound removed", "low")
    if verdict.reason == "fallback":
        return (f"Re-run {name} where its feature is supported (another GPU or "
                f"{_title(record)} release): the server fell back to the default path", "medium")
    change = _RETRY_ACTIONS.get(verdict.reason or "", "with more repetitions")
    return f"Re-run {name} {change}", "low"


def _with_parents(records: list[RunRecord]) -> str:
    """The approaches, each with the parent a retry runs beside it (`retry` adds it)."""
    return ", ".join(
        f"{r.approach} (with its parent {r.parent})" if r.parent else r.approach for r in records
    )


def _remedy_steps(
    pairs: list[tuple[RunRecord, Verdict]],
    *,
    baseline: RunRecord,
    metric: Metric,
    remedies: Remedies,
    rules: RuleSet,
    flags: FlagFacts | None,
    engine: str,
) -> list[dict[str, Any]]:
    found: list[tuple[int, int, dict[str, Any]]] = []
    by_cause: dict[str, list[tuple[str, Facts, dict[str, str]]]] = {}
    by_verdict: dict[str, list[tuple[str, Facts, dict[str, str]]]] = {}
    for record, verdict in pairs:
        problem = None
        if verdict.verdict == "failed" and verdict.cause == "bad-config":
            problem = flag_problem(record, rules=rules, flags=flags, engine=engine)
        facts = facts_of(record, baseline=baseline, engine=engine, problem=problem)
        comm = None if metric.lower_is_better else comm_of(record, baseline, metric.name)
        if comm is not None:  # cut communication first when it is most of the cycle
            facts = dataclasses.replace(facts, comm="most" if comm[0] * 2 >= comm[1] else "little")
        fields = _fields(record, verdict, facts=facts, problem=problem, metric=metric)
        fields.update(comm_ms=f"{comm[0]:.1f}" if comm else "the all-reduces'",
                      needed_ms=f"{comm[1]:.1f}" if comm else "the break-even")
        item = (record.approach, facts, fields)
        if verdict.verdict == "failed" and verdict.cause:
            by_cause.setdefault(verdict.cause, []).append(item)
        by_verdict.setdefault(verdict.verdict, []).append(item)
    for cause in sorted(by_cause, key=cause_rank):
        for remedy in remedies.for_cause(cause):
            for step in _offered(remedy, by_cause[cause], cause=cause):
                found.append((EFFORTS.index(remedy.effort), len(found), step))
    for verdict_name, items in by_verdict.items():
        for remedy in remedies.for_verdict(verdict_name):
            for step in _offered(remedy, items, cause=None):
                found.append((EFFORTS.index(remedy.effort), len(found), step))
    return [step for _, _, step in sorted(found, key=lambda item: (item[0], item[1]))]


def _offered(
    remedy: Remedy, items: list[tuple[str, Facts, dict[str, str]]], *, cause: str | None
) -> list[dict[str, Any]]:
    """One step per distinct text among the approaches whose facts meet `when`: approaches
    whose remedy reads the same share one step."""
    alike: dict[tuple[str, str], list[str]] = {}
    for name, facts, fields in items:
        if not remedy.when.holds(facts):
            continue
        text = (remedy.action.format(**fields), remedy.why.format(**fields))
        alike.setdefault(text, []).append(name)
    steps = []
    for (action, why), names in alike.items():
        joined = ", ".join(names)
        step = make_step("remedy", joined, action=action.replace(_MARK, joined),
                     why=why.replace(_MARK, joined), effort=remedy.effort)
        step["cause"] = cause
        steps.append(step)
    return steps


def _fields(
    record: RunRecord,
    verdict: Verdict,
    *,
    facts: Facts,
    problem: FlagProblem | None,
    metric: Metric,
) -> dict[str, str]:
    """The placeholders of remedies.PLACEHOLDERS for one approach."""
    fp = record.fingerprint
    evidence = (problem.line if problem is not None and problem.line else verdict.why)
    if len(evidence) > _EVIDENCE_CHARS:
        evidence = evidence[: _EVIDENCE_CHARS - 1] + "…"
    return {
        "approaches": _MARK,
        "compute_capability": fp.get("compute_capability") or "this GPU's",
        "gpu": fp.get("gpu") or "this GPU",
        "interconnect": fp.get("interconnect") or "this interconnect",
        "metric": metric.name,
        "unit": unit_of(metric.name) or "its unit",
        "engine": describe(facts.engine).in_text,
        "release": str(Stack.of(fp, engine=facts.engine).version or "this release"),
        "flag": (problem.flag if problem and problem.flag else "the rejected flag"),
        "new_flag": (problem.new_flag if problem and problem.new_flag else "its new name"),
        "value": (problem.value if problem and problem.value else "the value given"),
        "choices": (f"one of {problem.choices}" if problem and problem.choices
                    else "a value of the type it expects"),
        "hint": (problem.hint if problem and problem.hint else "no close match was found"),
        "evidence": evidence,
        "batch": record.batch,
    }


def _accept(
    pairs: list[tuple[RunRecord, Verdict]],
    steps: list[dict[str, Any]],
    *,
    key: dict[str, Any] | None,
    baseline: RunRecord,
    metric: Metric,
) -> dict[str, Any] | None:
    """Keep the best measured configuration (SPEC: offered whenever one was measured): the key
    achievement, else the baseline when it ran; None when nothing was measured. "Stop
    optimising" only when some approach was measured too and every step left is high effort."""
    if key is not None:
        best, value = key["approach"], key["value"]
    else:
        best, value = "baseline", median(baseline.samples(metric.name))
        if baseline.status != "ok":
            value = None
    if value is None:
        return None
    shown = with_unit(f"{value:.4g}", metric.name) if metric.name != CAPACITY \
        else f"capacity {value:g}"
    if key is not None and key.get("metric") == CAPACITY:  # it carries the most within the SLO
        shown = str(key["text"])
    if key is not None and key.get("load"):
        shown += f" at {load_label(key['load'])}"
    open_steps = [s for s in steps if s["kind"] in ("retry", "remedy")]
    cheap = [s for s in open_steps if s["effort"] != "high"]
    if not any(v.value is not None for _, v in pairs):
        return make_step(
            "accept", best, action=f"Keep {best} ({shown}) until a next step beats it",
            why="the only configuration measured: no approach produced a measurement, so "
            "nothing has been ruled out yet",
            effort="low",
        )
    if cheap:
        return make_step(
            "accept", best, action=f"Keep {best} ({shown}) until a next step beats it",
            why=f"the best configuration measured in this batch; {len(cheap)} cheaper "
            f"step{'s' if len(cheap) != 1 else ''} above may still beat it",
            effort="low",
        )
    return make_step(
        "accept", best,
        action=f"Accept {best} ({shown}) as the best configuration measured on this hardware",
        why="stop optimising: every option left is high effort for an uncertain gain"
        if open_steps else "no step is left open in this batch",
        effort="low",
    )


def _title(record: RunRecord) -> str:
    return describe(engine_of(record.fingerprint, named=record.engine)).title

