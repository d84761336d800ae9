"""The status digest: what the stored batches of the last days add up to. Pure data in, out.

`build_digest` takes batch rows (with their reports) and run records and returns plain data:
the batches people started in the period (a sweep and its confirmation are one experiment,
counted once), the best configuration per preset and hardware and how it moved, the wins, the
failures by cause (each approach once, with a count), the inconclusives still open and the next
steps still open; the regressions between consecutive experiments (`jobs.core.digest`:
judged deltas, or values of one configuration on one host and stack, with the stack change and
the overrides that differ); and, from memory across batches (docs/contracts.md), the known dead ends
skipped and the hours that saved, the hours spent per preset (GPU-hours, or CPU-hours where
there is no GPU), and the dead ends an upgrade re-opened (`Memory`, `memory_sections`).
`jobs.commands.digest` gathers its inputs from the store (`jobs.store.digest_queries`: the
window's batches and only the earlier rows each section needs); the templates `digest.*.j2`
format it.

The digest says no more than the reports judged:

- **Best configuration** per (preset, hardware): the judged result (verdict improved, unchanged
  or regressed against its own batch's baseline) with the largest `delta_pct`. Baselines differ
  from batch to batch, even on one host, so absolute medians are never compared across batches;
  inconclusive (confounded, noisy), failed, cancelled and skipped results never count, nor a
  sweep's points: a sweep's winner counts through its confirmation batch, with that verdict.
  `improvement` is false when the best judged delta is no improvement (the text says "no
  improvement judged"). "previous" is the best before the window; `change_pp` is the move from
  it in percentage points of delta (new best delta − previous best delta).
- **Next steps still open** are carried across a preset's last STEP_LOOKBACK reports, oldest
  first; a later batch of the preset settles a step when:
  - `retry` of an approach: the later batch judged that approach (improved, unchanged,
    regressed or, with load levels, mixed). A later inconclusive result brings its own retry,
    which replaces this one; a failure does not answer the question, so the retry stays open.
    `retry` of the whole batch (the baseline failed): the later batch measured its baseline.
  - `adopt`: the later batch judged the approach again, or its baseline already holds every
    knob the approach changed (the change was adopted).
  - `remedy` (and any other kind): every approach it names ran again (any verdict but cancelled
    or skipped); what those runs found brings its own steps.
  A batch that did not run an approach (a two-configuration retry) settles nothing about it.
  `accept` is never an open step.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from jobs.core.digest._digest_memory import (
    Judged,
    Memory,
    judged,
    memory_of,
    memory_sections,
    sweep_points,
)
from jobs.core.digest._digest_regressions import regressions
from jobs.core.digest._digest_wins import SETTLED, verdict_counts, wins_of
from jobs.core.digest._experiments import Experiment, experiments, is_confirmation
from jobs.core.plans import BatchRow
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, load_rules
from jobs.core.units import unit_of
from jobs.errors import UserError

STEP_KINDS = ("retry", "adopt", "remedy")  # docs/contracts.md's order; `accept` is never open
STEP_LOOKBACK = 20  # a preset's latest reports whose steps are carried (the store reads these)
NOT_RUN = ("cancelled", "skipped")


def build_digest(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    now: dt.datetime,
    days: float,
    tz: str = "UTC",
    memory: Memory | None = None,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """The digest of the `days` before `now`. Without `memory`, `rows` and `records` are the
    whole history and every section is computed from them."""
    since = now - dt.timedelta(days=days)
    recent = [r for r in rows if since <= r.created_at <= now]
    started = experiments(recent)  # a sweep and its confirmation: one experiment, counted once
    reports = [r for r in recent if r.report]
    zone = ZoneInfo(tz)
    if memory is None:
        memory = memory_of(rows, records, since=since, now=now)
    return {
        "period": {
            "days": days, "timezone": tz,
            "from": since.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
            "to": now.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
        },
        "batches": [_batch_line(e, zone) for e in started],
        "counts": dict(Counter(e.row.state for e in started)),
        "verdicts": verdict_counts(started),  # their results, mixed ones too
        "best": best_configurations(rows, records, since=since, now=now,
                                    earlier=memory.earlier),
        "wins": [win for e in started for win in wins_of(e)],
        "failures": failures_by_cause(reports),
        "inconclusive": open_inconclusives([e.row for e in started if e.row.report]),
        "next_steps": open_next_steps([r for r in rows if not is_confirmation(r)], now=now),
        "regressions": regressions(rows, records, since=since, now=now),
        **memory_sections(rows, records, memory=memory, since=since, now=now,
                          rules=load_rules() if rules is None else rules),
    }


def _batch_line(exp: Experiment, zone: ZoneInfo) -> dict[str, Any]:
    row = exp.row
    return {"batch": row.id, "preset": row.preset, "state": row.state, "queue": row.queue,
            "requested_by": row.requested_by,
            "created": row.created_at.astimezone(zone).strftime("%Y-%m-%d %H:%M"),
            "confirmation": None if exp.confirmation is None else exp.confirmation.id}


def _results(row: BatchRow) -> list[dict[str, Any]]:
    return list((row.report or {}).get("results") or [])


def best_configurations(
    rows: Sequence[BatchRow],
    records: Mapping[str, Sequence[RunRecord]],
    *,
    since: dt.datetime,
    now: dt.datetime,
    earlier: Sequence[Judged] | None = None,
) -> list[dict[str, Any]]:
    """Per (preset, hardware): the judged result with the largest delta against its own batch's
    baseline up to `now`, and the same before `since` ("previous"), with the change between the
    two in percentage points of delta. Absolute medians are never compared across batches.
    With `earlier` (the judged results before `since`), only the window's rows are read."""
    if earlier is None:
        points = judged([r for r in rows if r.created_at <= now], records)
    else:
        window = [r for r in rows if since <= r.created_at <= now]
        points = [*earlier, *judged(window, records)]
    best_now: dict[tuple[str, str], Judged] = {}
    best_before: dict[tuple[str, str], Judged] = {}
    for point in sorted(points, key=lambda p: p.created_at):  # the earlier holds a tie
        key = (point.preset, point.hardware)
        targets = [best_now] + ([best_before] if point.created_at < since else [])
        for target in targets:
            held = target.get(key)
            if held is None or point.delta_pct > held.delta_pct:
                target[key] = point
    out = []
    for key in sorted(best_now):
        best, before = best_now[key], best_before.get(key)
        entry = _judged_entry(best)
        entry["new"] = best.created_at >= since
        entry["improvement"] = best.delta_pct > 0 and best.verdict == "improved"
        entry["previous"] = None if before is None else _judged_entry(before)
        entry["change_pp"] = (None if before is None
                              else round(best.delta_pct - before.delta_pct, 1))
        out.append(entry)
    return out


def _judged_entry(point: Judged) -> dict[str, Any]:
    return {"preset": point.preset, "hardware": point.hardware, "approach": point.approach,
            "batch": point.batch, "metric": point.metric, "unit": unit_of(point.metric),
            "verdict": point.verdict, "delta_pct": point.delta_pct, "value": point.value}


def failures_by_cause(reports: Sequence[BatchRow]) -> list[dict[str, Any]]:
    """Failed results per cause, most first; each approach (preset/name) listed once, with how
    many times it failed (a dead end failing in every batch is one name, not one per batch)."""
    by_cause: dict[str, Counter[str]] = {}
    for row in reports:
        for res in _results(row):
            if res.get("verdict") == "failed":
                cause = str(res.get("cause") or "crash")
                by_cause.setdefault(cause, Counter())[f"{row.preset}/{res['approach']}"] += 1
    ranked = sorted(by_cause.items(), key=lambda item: (-item[1].total(), item[0]))
    return [{"cause": cause, "count": names.total(),
             "approaches": [{"approach": name, "count": n} for name, n in names.items()]}
            for cause, names in ranked]


def open_inconclusives(reports: Sequence[BatchRow]) -> list[dict[str, Any]]:
    """Inconclusive results that no later batch of the same preset settled (a sweep's points
    are judged by its confirmation, not here)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(reports, key=lambda r: r.created_at):
        points = sweep_points(row)
        for res in _results(row):
            if res.get("approach") in points:
                continue
            verdict = res.get("verdict")
            if verdict == "inconclusive":
                latest[(row.preset, res["approach"])] = {
                    "batch": row.id, "preset": row.preset, "approach": res["approach"],
                    "why": res.get("why", "")}
            elif verdict in SETTLED:
                latest.pop((row.preset, res["approach"]), None)
    return list(latest.values())


def open_next_steps(rows: Sequence[BatchRow], *, now: dt.datetime) -> list[dict[str, Any]]:
    """The next steps still open per preset, carried across its last STEP_LOOKBACK reports
    until a later batch settles them (the rules in the module's docstring); `accept` is never
    open. Per preset: retry, then adopt, then remedy steps, oldest batch first, ranked anew."""
    by_preset: dict[str, list[BatchRow]] = {}
    for row in sorted(rows, key=lambda r: (r.created_at, r.id)):
        if row.report and row.created_at <= now:
            by_preset.setdefault(row.preset, []).append(row)
    out: list[dict[str, Any]] = []
    for preset in sorted(by_preset):
        held: dict[tuple[str, ...], _Open] = {}
        for row in by_preset[preset][-STEP_LOOKBACK:]:
            for key in [k for k, step in held.items() if step.settled_by(row)]:
                del held[key]
            for step in (row.report or {}).get("next_steps") or []:
                if step.get("kind") != "accept":
                    opened = _Open(row, dict(step))
                    held.pop(opened.key, None)  # the later one of the same step stands
                    held[opened.key] = opened
        ordered = sorted(held.values(), key=lambda o: _kind_rank(o.step.get("kind")))
        for rank, opened in enumerate(ordered, start=1):
            out.append({"preset": preset, "batch": opened.row.id, **opened.step, "rank": rank})
    return out


def _kind_rank(kind: Any) -> int:
    return STEP_KINDS.index(kind) if kind in STEP_KINDS else len(STEP_KINDS)


def _verdicts(row: BatchRow) -> dict[str, str]:
    return {str(r.get("approach")): str(r.get("verdict")) for r in _results(row)}


class _Open:
    """One open step and what is left to settle it."""

    def __init__(self, row: BatchRow, step: dict[str, Any]) -> None:
        self.row, self.step = row, step
        kind, approach = str(step.get("kind")), step.get("approach")
        self.names = set() if not approach else {n.strip() for n in str(approach).split(",")}
        # a later batch's retry of the same approach replaces this one; other steps are one
        # per action
        self.key: tuple[str, ...] = ((kind, str(approach)) if kind == "retry"
                                     else (kind, str(approach), str(step.get("action"))))

    def settled_by(self, later: BatchRow) -> bool:
        kind, verdicts = self.step.get("kind"), _verdicts(later)
        if kind == "retry" and not self.names:  # the baseline failed: any measured one settles
            return ((later.report or {}).get("baseline") or {}).get("value") is not None
        if kind == "retry":
            return all(verdicts.get(n) in SETTLED for n in self.names)
        if kind == "adopt":
            return (all(verdicts.get(n) in SETTLED for n in self.names)
                    or self._adopted_in(later))
        self.names -= {n for n in self.names if verdicts.get(n) not in (None, *NOT_RUN)}
        return not self.names

    def _adopted_in(self, later: BatchRow) -> bool:
        """The later batch's baseline already holds every knob this approach changed."""
        base = later.plan.baseline
        for name in self.names:
            try:
                change = self.row.plan.config(name).change
            except UserError:
                return False
            args, env = change.get("server_args", {}), change.get("env", {})
            if not args and not env:
                return False
            if any(str(base.server_args.get(k)) != str(v) or k not in base.server_args
                   for k, v in args.items()):
                return False
            if any(base.env.get(k) != str(v) for k, v in env.items()):
                return False
        return bool(self.names)
