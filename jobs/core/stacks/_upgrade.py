"""An upgrade check's judgement (docs/contracts.md "Stacks"): each configuration on the new stack
against itself on the current one, by the verdict rules (level by level where there are load
levels), the dead ends the new stack re-opens and fixes, and the one line that ends the report:
"NEW is faster for 3 of 4 configurations (eagle3 +6.2%), slower for cudagraph-capture-128
(−4.0%), and breaks eagle3-nccl-tree (bad-config: --enable-nccl-nvls was removed)".

The stack is the change under test: its engine, torch, CUDA and NCCL versions differ by design,
so they are no drift; the host's own (GPU, count, driver) still are. A knob a release spells
differently (renamed) is the same configuration.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.levels import report_levels
from jobs.core.memory import DETERMINISTIC, known_from
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.stacks._order import diff_text, stack_diff
from jobs.core.verdicts import Metric, Verdict, failure_cause, has_failed, median
from jobs.core.workloads import judge

# What a stack changes by design (besides the engine's version): no drift between two stacks.
STACK_PARTS = ("torch", "cuda", "nccl")
OUTCOMES = ("faster", "slower", "mixed", "unchanged", "inconclusive", "breaks", "fixes", "fails",
            "cancelled", "skipped")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: ((?:--[\w.-]+ ?)+)")
_UNEXPECTED_KEY = re.compile(r"validation error for (\w+)\n(\w+)\n\s+Unexpected keyword argument")
MINUS = "\u2212"


def judge_upgrade(old: RunRecord, new: RunRecord, *, metric: Metric, rules: RuleSet,
                  engine: str) -> Verdict:
    """`new` (the configuration on the new stack) against `old` (on the current one)."""
    covered = (describe(engine).version_key or engine, *STACK_PARTS)
    fingerprint = {**old.fingerprint, **{k: new.fingerprint.get(k) for k in covered}}
    extra = {k: v for k, v in old.extra.items() if k != "bracket"}  # the alternation is ours
    before = dataclasses.replace(old, role="baseline", server_args=dict(new.server_args),
                                 env=dict(new.env), fingerprint=fingerprint, extra=extra)
    return judge(new, before, metric=metric, rules=rules)


def outcome(old: RunRecord, new: RunRecord, verdict: Verdict, *, metric: Metric) -> str:
    """What the upgrade does to one configuration (OUTCOMES)."""
    for record in (new, old):
        if record.status in ("cancelled", "skipped"):
            return record.status
    old_failed, new_failed = has_failed(old, metric.name), has_failed(new, metric.name)
    if old_failed or new_failed:
        return "fails" if old_failed and new_failed else "breaks" if new_failed else "fixes"
    return {"improved": "faster", "regressed": "slower", "mixed": "mixed",
            "unchanged": "unchanged"}.get(verdict.verdict, "inconclusive")


def upgrade_section(
    old: Sequence[RunRecord], new: Sequence[RunRecord], *, metric: Metric, rules: RuleSet,
    engine: str, current: str, against: str,
) -> dict[str, Any]:
    """The report's `upgrade`: every configuration measured on both stacks (paired by name, in
    the current stack's order), the dead ends the new stack re-opens, and the summary line."""
    theirs = {r.approach: r for r in new}
    results: list[dict[str, Any]] = []
    reopened: list[dict[str, Any]] = []
    for ours in old:
        other = theirs.get(ours.approach)
        if other is None:
            continue
        verdict = judge_upgrade(ours, other, metric=metric, rules=rules, engine=engine)
        kind = outcome(ours, other, verdict, metric=metric)
        cause = failure_cause(other, metric=metric, rules=rules)
        results.append({
            "approach": ours.approach, "outcome": kind, "verdict": verdict.verdict,
            "cause": cause, "value": median(other.samples(metric.name)),
            "before": median(ours.samples(metric.name)),
            "delta_pct": verdict.delta_pct if kind not in ("breaks", "fixes", "fails") else None,
            "why": _why(ours, other, verdict, kind=kind, cause=cause, metric=metric,
                        rules=rules),
            "by_load": report_levels(verdict),
        })
        if (entry := _reopened(ours, other, metric=metric, rules=rules)) is not None:
            reopened.append(entry)
    base_old = next((r for r in old if r.role == "baseline"), old[0] if old else None)
    base_new = theirs.get(base_old.approach) if base_old is not None else None
    diff = [] if base_old is None or base_new is None else stack_diff(
        base_old.fingerprint, base_new.fingerprint, engine=engine)
    return {"from": current, "to": against, "stack_diff": diff, "results": results,
            "reopened": reopened,
            "summary": summary_line(results, against=against),
            "memory": memory_line(reopened, current=current, against=against),
            "diff_text": diff_text(diff)}


def _why(old: RunRecord, new: RunRecord, verdict: Verdict, *, kind: str, cause: str | None,
         metric: Metric, rules: RuleSet) -> str:
    if kind == "breaks":
        return f"{cause}: {removed(new, old) or verdict.why}"
    if kind == "fixes":
        was = failure_cause(old, metric=metric, rules=rules)
        return f"failed on the current stack ({was}); ran on this one"
    if kind == "fails":
        return f"fails on both stacks ({cause}): {verdict.why}"
    return verdict.why


def removed(new: RunRecord, old: RunRecord) -> str | None:
    """What the new release no longer takes that the old one ran with: the flags its parser
    refused ("--x was removed") or a config key it refused; None when its log says neither."""
    flags = {"--" + str(k).replace("_", "-") for k in old.server_args}
    found = _UNRECOGNIZED.search(new.log_tail)
    if found is not None:
        gone = [f for f in found.group(1).split() if f in flags]
        if gone:
            return f"{' and '.join(gone)} {'was' if len(gone) == 1 else 'were'} removed"
    key = _UNEXPECTED_KEY.search(new.log_tail)
    if key is not None:
        return f"{key.group(1)}'s {key.group(2)} was removed"
    return None


def _reopened(old: RunRecord, new: RunRecord, *, metric: Metric,
              rules: RuleSet) -> dict[str, Any] | None:
    """A dead end of the current stack that the new stack tried again, and whether it fixed it."""
    if not has_failed(old, metric.name) or known_from(new) is not None:
        return None
    cause = failure_cause(old, metric=metric, rules=rules)
    if cause not in DETERMINISTIC:
        return None
    fixed = new.status == "ok" and not has_failed(new, metric.name)
    return {"approach": old.approach, "cause": cause, "known_from": known_from(old),
            "fixed": fixed,
            "now": None if fixed else failure_cause(new, metric=metric, rules=rules)}


def pct(value: float | None) -> str:
    """A change as the summary line writes it: +6.2%, −4.0% (a minus sign, not a hyphen)."""
    if value is None:
        return "n/a"
    return f"+{value:.1f}%" if value >= 0 else f"{MINUS}{abs(value):.1f}%"


def summary_line(results: Sequence[Mapping[str, Any]], *, against: str) -> str:
    """The one line an upgrade check ends with (see the module)."""
    by: dict[str, list[Mapping[str, Any]]] = {k: [] for k in OUTCOMES}
    for result in results:
        by[str(result["outcome"])].append(result)
    measured = sum(len(by[k]) for k in ("faster", "slower", "mixed", "unchanged", "inconclusive"))
    of = f"{measured} configuration{'s' if measured != 1 else ''}"
    states: list[str] = []
    if by["faster"]:
        best = max(by["faster"], key=lambda r: r["delta_pct"] or 0.0)
        states.append(f"faster for {len(by['faster'])} of {of} "
                      f"({best['approach']} {pct(best['delta_pct'])})")
    if by["slower"]:
        states.append("slower for " + _names(by["slower"], lambda r: pct(r["delta_pct"])))
    if by["mixed"]:
        states.append("mixed for " + _names(by["mixed"], lambda r: _crossover(r)))
    if not states and measured:
        calm = len(by["unchanged"])
        states.append(f"unchanged for {calm} of {of}" if calm else f"inconclusive for {of}")
    acts: list[str] = []
    if by["breaks"]:
        acts.append("breaks " + _names(by["breaks"], lambda r: str(r["why"])))
    if by["fixes"]:
        acts.append("fixes " + _names(by["fixes"], lambda r: "failed before, runs now"))
    if by["fails"]:
        acts.append("still fails " + _names(by["fails"], lambda r: str(r["cause"])))
    if not states and not acts:
        return f"{against}: nothing was measured on both stacks"
    clauses = [*states, *acts]
    text = clauses[0] if len(clauses) == 1 else (
        ", ".join(clauses[:-1]) + f"{',' if len(clauses) > 2 else ''} and {clauses[-1]}")
    return f"{against} {'is ' if states else ''}{text}"


def _names(results: Sequence[Mapping[str, Any]], detail: Any) -> str:
    parts = [f"{r['approach']} ({detail(r)})" for r in results]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


def _crossover(result: Mapping[str, Any]) -> str:
    why = str(result.get("why") or "")
    return why.split(":", 1)[0] if why else "some levels better, others worse"


def memory_line(reopened: Sequence[Mapping[str, Any]], *, current: str,
                against: str) -> str | None:
    """What the upgrade check says of memory: the dead ends of the current stack the new stack
    re-opens, and which of them it fixes; None when it re-opens none."""
    if not reopened:
        return None
    fixed = [r for r in reopened if r["fixed"]]
    parts = []
    for entry in reopened:
        known = f", known from {entry['known_from']}" if entry.get("known_from") else ""
        state = "fixed" if entry["fixed"] else f"still fails ({entry['now']})"
        parts.append(f"{entry['approach']} ({entry['cause']}{known}): {state}")
    count = len(reopened)
    return (f"{against} re-opens {count} dead end{'s' if count != 1 else ''} of {current} and "
            f"fixes {len(fixed)}: " + "; ".join(parts))
