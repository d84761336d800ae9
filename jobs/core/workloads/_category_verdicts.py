"""Verdicts per task category (docs/contracts.md "Workloads that represent the traffic").

Each category of an approach's run is judged by the verdict rules against the baseline's run
at the same category. The result's own verdict is read off its categories as a leveled result's
is off its levels: `improved` when some improved and none regressed, `regressed` the other way,
`mixed` when some did each (its why names where it wins and loses: "improved on conversation
and code, regressed on summarization"), otherwise the rules' precedence over them. What holds
for the whole run decides alone: a failure, a cancel, a failed baseline, a confound, another
stack, a fallback. The result's value and delta are the categories' mean's (the record's
top-level metrics). A batch without a workload is judged as before (jobs.core.levels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jobs.core import levels
from jobs.core.noise import Spread
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.verdicts import Metric, Verdict, judge_point
from jobs.core.workloads._category_records import (
    at_category,
    by_category,
    category_accept,
    category_names,
)

MEASURED = ("improved", "regressed", "unchanged")
PRECEDENCE = ("failed", "cancelled", "skipped", "inconclusive", "unchanged")
WHOLE_RUN = ("baseline", "confound", "drift", "fallback")
"""The reasons an inconclusive verdict holds for every category alike: the run's own."""


def judge(
    record: RunRecord, baseline: RunRecord, *, metric: Metric, rules: RuleSet,
    history: Spread | None = None,
) -> Verdict:
    """The verdict of one approach against the baseline: category by category where the batch
    ran a workload, else as jobs.core.levels judges it."""
    whole = levels.judge(record, baseline, metric=metric, rules=rules, history=history)
    names = category_names([baseline, record])
    if not names:
        return whole
    entries = tuple(_category(record, baseline, name, metric=metric, rules=rules)
                    for name in names)
    if whole.verdict in ("failed", "cancelled", "skipped") or (
            whole.verdict == "inconclusive" and whole.reason in WHOLE_RUN):
        return dataclasses.replace(whole, categories=entries)
    verdict = overall([e["verdict"] for e in entries])
    same = next((e for e in entries if e["verdict"] == verdict), entries[0])
    return dataclasses.replace(
        whole, verdict=verdict, cause=same["cause"] if verdict == "failed" else None,
        why=category_why(entries, verdict),
        reason=same.get("reason") if verdict == "inconclusive" else None,
        confound=None, categories=entries)


def overall(names: Sequence[str]) -> str:
    """The result's verdict from its categories' (see the module)."""
    if "improved" in names and "regressed" in names:
        return "mixed"
    if "improved" in names or "regressed" in names:
        return "improved" if "improved" in names else "regressed"
    return next(name for name in PRECEDENCE if name in names)


def _category(record: RunRecord, baseline: RunRecord, name: str, *, metric: Metric,
              rules: RuleSet) -> dict[str, Any]:
    ours, theirs = at_category(record, name), at_category(baseline, name)
    verdict = judge_point(ours, theirs, metric=metric, rules=rules)
    if verdict.verdict == "skipped" and record.status in ("failed", "timeout"):
        verdict = dataclasses.replace(
            verdict, why=f"not reached: the run ended ({record.status}) at an earlier category")
    entry = next((e for e in by_category(record) if e["category"] == name), {})
    return {"category": name, "verdict": verdict.verdict, "cause": verdict.cause,
            "value": verdict.value, "delta_pct": verdict.delta_pct,
            "accept_length": category_accept(entry) if entry else None, "why": verdict.why,
            "reason": verdict.reason}


def category_why(entries: Sequence[dict[str, Any]], verdict: str) -> str:
    """What the result's why says of its categories: where it wins and where it loses, then
    each category's delta ("improved on conversation and code, regressed on summarization:
    conversation +12.0%, code +8.1%, summarization -9.3%")."""
    if len(entries) == 1:
        return f"on {entries[0]['category']}: {entries[0]['why']}"
    details = ", ".join(f"{e['category']} {short(e)}" for e in entries)
    kinds = list(dict.fromkeys(e["verdict"] for e in entries))
    if len(kinds) == 1:
        return f"{verdict} on every category: {details}"
    order = ("improved", "regressed", *(k for k in kinds if k not in ("improved", "regressed")))
    grouped = ", ".join(
        f"{WORDS.get(kind, kind)} on "
        f"{names_text([e['category'] for e in entries if e['verdict'] == kind])}"
        for kind in order if kind in kinds)
    return f"{grouped}: {details}"


WORDS = {"skipped": "not reached", "cancelled": "cancelled"}


def names_text(names: Sequence[str]) -> str:
    """'conversation', 'conversation and code', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def short(entry: dict[str, Any]) -> str:
    """A category's verdict in a word or a number: '+12.0%', 'out-of-memory', 'noisy'."""
    verdict, delta = entry["verdict"], entry.get("delta_pct")
    if verdict in MEASURED and delta is not None:
        return f"{delta:+.1f}%"
    if verdict == "failed":
        return str(entry.get("cause") or "failed")
    if verdict in ("skipped", "cancelled"):
        return WORDS[verdict]
    if delta is not None:
        return f"{delta:+.1f}% {REASONS.get(str(entry.get('reason')), 'inconclusive')}"
    return "inconclusive"


REASONS = {"noise": "noisy", "one-rep": "one repetition", "host-drift": "host drift"}
