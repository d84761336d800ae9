"""The `adopt` next steps (docs/contracts.md): make the key achievement the new baseline, at the
load it improved most where the batch has load levels; a `mixed` result adopted up to its crossover
("Adopt eagle3 up to max-concurrency 4; keep the baseline from 16")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.capacity import CAPACITY
from jobs.core.levels import crossover, load_number, loads_text
from jobs.core.plans import Load, load_label, load_value
from jobs.core.records import RunRecord
from jobs.core.verdicts import Metric, Verdict
from jobs.core.workloads import names_text
from jobs.redaction import is_secret_name


def adopt_steps(
    approaches: Sequence[RunRecord],
    verdicts: Sequence[Verdict],
    *,
    key: dict[str, Any] | None,
    metric: Metric,
    unexplained: frozenset[str] = frozenset(),
    capacity: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The key achievement's adopt step first, then one for each other mixed result; one whose
    win its hypothesis does not explain (`unexplained`) is confirmed at the loads that matter
    first. `capacity`: each result's capacity (docs/contracts.md "Capacity under the SLO"): a
    win whose capacity regressed is adopted only up to its capacity, like a mixed result."""
    pairs = list(zip(approaches, verdicts, strict=True))
    steps: list[dict[str, Any]] = []
    if key is not None:
        record, verdict = next((r, v) for r, v in pairs if r.approach == key["approach"])
        load = key.get("load")
        at = f" at {load_label(load)}" if load else ""
        why = f"the largest improvement: {key['delta_pct']:+.1f}% on {metric.name}{at}" \
            if key.get("metric") != CAPACITY else f"the largest capacity gain: {key['why']}"
        if verdict.verdict == "mixed":
            steps.append(_mixed(record, verdict, why=why))
        else:
            knobs = knob_text(record.change)
            action = f"Make {record.approach} the new baseline" + (f" ({knobs})" if knobs else "")
            if record.approach in unexplained:
                action = (f"Confirm {record.approach} at the loads that matter (`loads:` with "
                          f"the concurrencies you serve), then make it the new baseline"
                          + (f" ({knobs})" if knobs else "")
                          + ": its gain is not the one its hypothesis predicts")
            step = make_step("adopt", record.approach, action=action, why=why, effort="low")
            if "load" in key:
                step["load"] = load
            steps.append(step)
    for record, verdict in pairs:
        if verdict.verdict == "mixed" and (key is None or record.approach != key["approach"]):
            steps.append(_mixed(record, verdict, why=verdict.why))
        found = (capacity or {}).get(record.approach) or {}
        if verdict.verdict == "improved" and found.get("verdict") == "regressed" \
                and (key is None or record.approach != key["approach"]):
            steps.append(_within_capacity(record, found, metric=metric, verdict=verdict))
    return steps


def _within_capacity(record: RunRecord, found: Mapping[str, Any], *, metric: Metric,
                     verdict: Verdict) -> dict[str, Any]:
    """A win at `from` that carries less within the SLO: adopt it only below its capacity."""
    limit, load = found.get("value"), found.get("load")
    where = "nowhere under load" if limit is None or not isinstance(load, dict) else \
        f"only up to its capacity, {load_label(load)}"
    step = make_step(
        "adopt", record.approach,
        action=f"Adopt {record.approach} {where}; keep the baseline where the load comes near "
        "the SLO", effort="low",
        why=f"{verdict.delta_pct:+.1f}% on {metric.name} at its lightest load, but "
        f"{found.get('why')}")
    if limit is not None:
        step["capacity"] = limit
    return step


def _mixed(record: RunRecord, verdict: Verdict, *, why: str) -> dict[str, Any]:
    """Adopt where it improved, keep the baseline where it regressed; `load`: the improved
    level at the crossover (the highest improved level when it wins at low load); a workload's
    result: for the categories it improved (`categories`)."""
    if verdict.categories:
        return _mixed_categories(record, verdict, why=why)
    cross = crossover(verdict.levels)
    assert cross is not None
    ups: list[Load] = cross["improved"]
    downs: list[Load] = cross["regressed"]
    top_up = max(load_value(u) or 0.0 for u in ups)
    low_down = min(load_value(d) or 0.0 for d in downs)
    name = record.approach
    if top_up < low_down:
        load = ups[-1]
        action = (f"Adopt {name} up to {load_label(load)}; keep the baseline from "
                  f"{load_number(downs[0])}")
    elif max(load_value(d) or 0.0 for d in downs) < min(load_value(u) or 0.0 for u in ups):
        load = ups[0]
        action = (f"Adopt {name} from {load_label(load)}; keep the baseline up to "
                  f"{load_number(downs[-1])}")
    else:
        load = ups[-1]
        action = (f"Adopt {name} at {loads_text(ups)}; keep the baseline at "
                  f"{loads_text(downs, knob=False)}")
    knobs = knob_text(record.change)
    step = make_step("adopt", name, action=action, effort="low",
                     why=why + (f"; its change: {knobs}" if knobs else ""))
    step["load"] = dict(load)
    return step


def _mixed_categories(record: RunRecord, verdict: Verdict, *, why: str) -> dict[str, Any]:
    """A workload's mixed result: adopt it for the traffic it wins, keep the baseline for the
    traffic it loses (docs/contracts.md "Workloads that represent the traffic")."""
    ups = [e["category"] for e in verdict.categories if e["verdict"] == "improved"]
    downs = [e["category"] for e in verdict.categories if e["verdict"] == "regressed"]
    knobs = knob_text(record.change)
    step = make_step(
        "adopt", record.approach, effort="low",
        action=f"Adopt {record.approach} for {names_text(ups)} traffic; keep the baseline for "
        f"{names_text(downs)}", why=why + (f"; its change: {knobs}" if knobs else ""))
    step["categories"] = {"improved": ups, "regressed": downs}
    return step


def knob_text(change: dict[str, dict[str, Any]]) -> str:
    """The declared change as `knob=value` pairs, secrets masked."""
    parts = [f"{k}={v}" for k, v in change.get("server_args", {}).items()]
    parts += [
        f"{k}={'***' if is_secret_name(k) else v}" for k, v in change.get("env", {}).items()
    ]
    return ", ".join(parts)


def make_step(
    kind: str, approach: str | None, *, action: str, why: str, effort: str
) -> dict[str, Any]:
    return {
        "rank": 0, "kind": kind, "approach": approach, "action": action, "why": why,
        "effort": effort,
    }
