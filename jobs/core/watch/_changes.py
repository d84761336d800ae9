"""A candidate settled by its confirmation (docs/contracts.md "Regression watch", "Confirmation
before any alert", "The alert"): the change as plain data, what the thread and the alert say, and
each key's precision.

A change is `confirmed` when its confirmation also lies on the new side, else a `blip` (one
night: "a one-night blip"; k nights: "not confirmed: x% over k nights"); a person then
`acknowledged` or `dismissed` a confirmed one. A blip leaves the series as measured: the night's
point stays, and a real change is raised again on a later night while it is at most
`MAX_AGE` nights old. A confirmed change starts a new segment, dismissed or not: it is never
alerted again. `Change.bisect` is what a bisect needs: the configuration, the key, the last good
and the first bad batch and their stacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.core.watch._detect import Candidate, confirms
from jobs.core.watch._series import SeriesKey, SeriesPoint
from jobs.core.watch._stack_diff import diff_text, is_environment, stack_diff

CANDIDATE, CONFIRMED, BLIP = "candidate", "confirmed", "blip"
ACKNOWLEDGED, DISMISSED = "acknowledged", "dismissed"
STATES = (CANDIDATE, CONFIRMED, BLIP, ACKNOWLEDGED, DISMISSED)
ALERTED = (CONFIRMED, ACKNOWLEDGED, DISMISSED)  # confirmed, whatever a person said since
ACTIONS = {"ack": ACKNOWLEDGED, "dismiss": DISMISSED}


@dataclass(frozen=True)
class Change:
    """One candidate and what became of it; `data` is what the store keeps as JSON."""

    key: SeriesKey
    batch: str  # the night whose newest point raised it
    state: str
    data: Mapping[str, Any] = field(default_factory=dict)
    id: int | None = None
    confirmation: str | None = None

    @property
    def delta_pct(self) -> float:
        return float(self.data.get("delta_pct") or 0.0)

    @property
    def environment(self) -> bool:
        return bool(self.data.get("environment"))

    @property
    def since(self) -> str:
        return str(self.data.get("first_bad", {}).get("batch") or self.batch)

    def bisect(self) -> dict[str, Any]:
        """What a bisect of the stacks between the last good and the first bad point starts
        from: the configuration, the key, its load, the values before and after the change,
        which way it went, the stack diff, and those two points' batches and stacks."""
        data = self.data
        return {"approach": self.key.approach, "key": self.key.key, "load": self.key.load,
                "before": (data.get("before") or {}).get("value"),
                "after": (data.get("after") or {}).get("value"),
                "direction": data.get("direction"),
                "stack_diff": list(data.get("stack_diff") or []),
                "environment": bool(data.get("environment")),
                "last_good": dict(data.get("last_good") or {}),
                "first_bad": dict(data.get("first_bad") or {})}

    def to_dict(self) -> dict[str, Any]:
        """docs/contracts.md's `changes` entry of `watch show --format json`."""
        data = self.data
        return {"id": self.id, "approach": self.key.approach, "key": self.key.key,
                "load": self.key.load or None, "batch": self.batch,
                "confirmation": self.confirmation, "state": self.state,
                "before": data.get("before"), "after": data.get("after"),
                "delta_pct": data.get("delta_pct"), "stack_diff": list(data.get("stack_diff")
                                                                       or []),
                "environment": bool(data.get("environment")), "nights": data.get("nights"),
                "effect_pct": data.get("effect_pct"),
                "direction": data.get("direction"),
                "confirmation_value": data.get("confirmation_value"),
                "last_good": data.get("last_good"), "first_bad": data.get("first_bad"),
                "span": data.get("span"), "acknowledged_by": data.get("by"),
                "acknowledged_at": data.get("at")}


def candidate_change(
    candidate: Candidate, *, series: Sequence[SeriesPoint], confirmation: str | None,
) -> Change:
    """A candidate as it is stored while its confirmation runs."""
    newest = series[-1]
    return Change(key=newest.key, batch=newest.batch, state=CANDIDATE, confirmation=confirmation,
                  data=_data(candidate, series=series, confirmation=None))


def settle(
    candidate: Candidate, *, series: Sequence[SeriesPoint], confirmation: SeriesPoint | None,
    confirming_batch: str | None, min_effect_pct: float,
) -> Change:
    """The candidate judged by its confirmation's point on the same key (None: the
    confirmation measured nothing there, so nothing is confirmed)."""
    newest = series[-1]
    confirmed = confirmation is not None and confirms(
        candidate, confirmation.value, min_effect_pct=min_effect_pct)
    return Change(key=newest.key, batch=newest.batch, state=CONFIRMED if confirmed else BLIP,
                  confirmation=confirming_batch,
                  data=_data(candidate, series=series, confirmation=confirmation))


def _data(
    candidate: Candidate, *, series: Sequence[SeriesPoint], confirmation: SeriesPoint | None,
) -> dict[str, Any]:
    at = {p.batch: i for i, p in enumerate(series)}
    first, last_good = series[at[candidate.since]], series[at[candidate.last_good]]
    new = [p.value for p in series[at[candidate.since]:]]
    after_values = new + ([confirmation.value] if confirmation is not None else [])
    after_mean = sum(after_values) / len(after_values)
    diff = stack_diff(last_good.stack, first.stack)
    worse = (candidate.direction > 0) == series[-1].lower_is_better
    return {
        "before": {"value": candidate.old_mean, "low": candidate.old_low,
                   "high": candidate.old_high, "batches": candidate.old_n,
                   "sd": candidate.old_sd},
        "after": {"value": after_mean, "low": min(after_values), "high": max(after_values),
                  "batches": len(new)},
        "delta_pct": 100.0 * (after_mean - candidate.old_mean) / abs(candidate.old_mean),
        "effect_pct": candidate.effect_pct, "nights": candidate.age,
        "direction": "regression" if worse else "improvement",
        "confirmation_value": None if confirmation is None else confirmation.value,
        "confirmation_pct": None if confirmation is None else
        100.0 * (confirmation.value - candidate.old_mean) / abs(candidate.old_mean),
        "threshold": {"t_stat": candidate.t_stat, "t_crit": candidate.t_crit,
                      "k_conf": candidate.k_conf},
        "stack_diff": diff, "environment": is_environment(diff),
        "last_good": {"batch": last_good.batch, "stack": dict(last_good.stack)},
        "first_bad": {"batch": first.batch, "stack": dict(first.stack)},
    }


def outcome_text(change: Change) -> str:
    """The line a night's thread gets for a settled candidate."""
    data = change.data
    effect, again = data.get("effect_pct") or 0.0, data.get("confirmation_pct")
    rerun = "its confirmation measured nothing" if again is None else \
        f"its confirmation {again:+.1f}%"
    where = change.key.label()
    if change.state == BLIP:
        nights = int(data.get("nights") or 1)
        if nights == 1:
            return f"{where}: not confirmed: a one-night blip ({effect:+.1f}%; {rerun})"
        return (f"{where}: not confirmed: {effect:+.1f}% over {nights} nights since batch "
                f"{change.since} ({rerun})")
    return f"{where}: {headline(change)}"


def headline(change: Change) -> str:
    """'regression −9.9%: 100 → 90.1 ...' for a confirmed change; an environment change and an
    improvement say so."""
    data = change.data
    before, after = data.get("before") or {}, data.get("after") or {}
    kind = "environment change (not a regression)" if change.environment else \
        str(data.get("direction") or "change")
    diff = diff_text(list(data.get("stack_diff") or []))
    stack = diff or "same stack: the host or the workload changed"
    return (f"{kind} {change.delta_pct:+.1f}%: {_num(before.get('value'))} "
            f"({_num(before.get('low'))}–{_num(before.get('high'))} over "
            f"{before.get('batches')} batches) → {_num(after.get('value'))} "
            f"({_num(after.get('low'))}–{_num(after.get('high'))}); first in batch "
            f"{change.since}, confirmed by {change.confirmation}; {stack}")


def precision(changes: Iterable[Change]) -> list[dict[str, Any]]:
    """Each key's confirmed, dismissed and blip candidates, and its precision: the share of
    its confirmed changes nobody dismissed (None before the first)."""
    counts: dict[SeriesKey, dict[str, int]] = {}
    for change in changes:
        count = counts.setdefault(change.key, {"confirmed": 0, "dismissed": 0, "blips": 0})
        if change.state in ALERTED:
            count["confirmed"] += 1
        if change.state == DISMISSED:
            count["dismissed"] += 1
        if change.state == BLIP:
            count["blips"] += 1
    return [{"approach": k.approach, "key": k.key, "load": k.load or None, **c,
             "precision": None if not c["confirmed"] else
             (c["confirmed"] - c["dismissed"]) / c["confirmed"]}
            for k, c in sorted(counts.items(), key=lambda kv: (kv[0].approach, kv[0].key,
                                                               kv[0].load))]


def cuts_of(changes: Iterable[Change]) -> dict[SeriesKey, set[str]]:
    """Each key's confirmed changes' first batches: where its segments start."""
    cuts: dict[SeriesKey, set[str]] = {}
    for change in changes:
        if change.state in ALERTED:
            cuts.setdefault(change.key, set()).add(change.since)
    return cuts


def _num(value: Any) -> str:
    if not isinstance(value, int | float):
        return "?"
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
