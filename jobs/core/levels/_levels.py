"""Verdicts that hold under load (docs/contracts.md "Load levels and service-level objectives").

Each level of an approach's run is judged by the verdict rules (jobs.core.verdicts) against the
baseline at the same level, then by the SLO: only the approach breaking a limit makes the level
`regressed`, only the baseline `improved`, both `inconclusive`. The result's own verdict is read
off its levels: `improved`, `regressed`, `mixed` (with its crossover), else the rules'
precedence. A batch without loads or SLO is judged as before, at its one operating point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.core import verdicts
from jobs.core.capacity import CAPACITY
from jobs.core.engine_info import describe, engine_of
from jobs.core.noise import Spread
from jobs.core.plans import Load, load_label
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.units import with_unit
from jobs.core.verdicts import Metric, Verdict, has_failed, judge_point, median, remembered

MEASURED = ("improved", "regressed", "unchanged")
PRECEDENCE = ("failed", "cancelled", "skipped", "inconclusive", "unchanged")
"""A result's verdict when no level improved or regressed: the first of these any level has."""


def is_level_aware(records: Sequence[RunRecord], metric: Metric) -> bool:
    """Whether a batch is judged level by level: its runs have load levels, or it has an SLO
    (not for `metric: capacity`: a capacity is judged by its own rule, jobs.core.capacity)."""
    if metric.name == CAPACITY:
        return False
    return bool(metric.limits) or any(r.by_load for r in records)


def judge(
    record: RunRecord, baseline: RunRecord, *, metric: Metric, rules: RuleSet,
    history: Spread | None = None,
) -> Verdict:
    """The verdict of one approach against the baseline, level by level where the batch has
    load levels or an SLO (a batch with an SLO and no loads is one level: the run itself);
    `history`: the baseline's spread across earlier batches (one operating point only)."""
    if not is_level_aware([record, baseline], metric):
        return verdicts.judge(record, baseline, metric=metric, rules=rules, history=history)
    loads = [level["load"] for level in (record.by_load or baseline.by_load)] or [{}]
    levels = [_level(record, baseline, load, metric=metric, rules=rules) for load in loads]
    return remembered(record, _overall(levels))


@dataclass(frozen=True)
class _Level:
    load: Load
    verdict: Verdict
    slo: str | None
    figures: dict[str, float]
    short: str  # what the result's `why` says of this level: "+12.0%", "out-of-memory"

    def entry(self) -> dict[str, Any]:
        v = self.verdict
        return {"load": dict(self.load), "verdict": v.verdict, "cause": v.cause,
                "value": v.value, "delta_pct": v.delta_pct, "slo": self.slo, "why": v.why,
                "figures": self.figures}


def view(record: RunRecord, load: Load) -> RunRecord:
    """The run at one load level (the run itself without levels); a level the run does not
    list is one it never reached."""
    levels = record.by_load
    if not levels:
        return record
    for index, level in enumerate(levels):
        if level["load"] == load:
            return record.at_level(index)
    return dataclasses.replace(record.at_level(0), metrics={}, status="skipped")


def slo_medians(run: RunRecord, limits: Mapping[str, float]) -> dict[str, float | None]:
    """Each SLO key's median over the run's repetitions (None: not measured)."""
    return {key: median(run.samples(key)) for key in limits}


def breaches(run: RunRecord, limits: Mapping[str, float]) -> tuple[dict[str, float], bool]:
    """The limits a run's medians break (key -> median), and whether every key was measured."""
    found = slo_medians(run, limits)
    broken = {k: v for k, v in found.items() if v is not None and v > limits[k]}
    return broken, None not in found.values()


def slo_state(run: RunRecord, metric: Metric) -> str | None:
    """"violated" / "met" for a run that measured; None without an SLO or a measurement."""
    if not metric.limits or has_failed(run, metric.name) or run.status != "ok":
        return None
    broken, known = breaches(run, metric.limits)
    return "violated" if broken else "met" if known else None


def figures(run: RunRecord, metric: Metric) -> dict[str, float]:
    """The medians at one level of the metric, every SLO key and the engine's usual metrics."""
    usual = describe(engine_of(run.fingerprint, named=run.engine)).metrics
    keys = dict.fromkeys([metric.name, *metric.limits, *usual])
    out: dict[str, float] = {}
    for key in keys:
        value = median(run.samples(key))
        if value is not None:
            out[key] = value
    return out


def _level(
    record: RunRecord, baseline: RunRecord, load: Load, *, metric: Metric, rules: RuleSet
) -> _Level:
    ours, theirs = view(record, load), view(baseline, load)
    verdict = judge_point(ours, theirs, metric=metric, rules=rules)
    state = slo_state(ours, metric)
    if verdict.verdict == "skipped" and record.status in ("failed", "timeout"):
        verdict = dataclasses.replace(
            verdict, why=f"not reached: the run ended ({record.status}) at a lower level")
    short = _short(verdict)
    overridable = verdict.verdict in MEASURED or verdict.reason == "noise"
    if metric.limits and overridable:
        verdict, short = _by_slo(ours, theirs, verdict, load=load, metric=metric, state=state,
                                 short=short)
    return _Level(load, verdict, state, figures(ours, metric), short)


def _by_slo(
    ours: RunRecord, theirs: RunRecord, verdict: Verdict, *, load: Load, metric: Metric,
    state: str | None, short: str,
) -> tuple[Verdict, str]:
    """The SLO over a measured verdict: only ours breaks → regressed, only the baseline's →
    improved (ours met it), both → inconclusive."""
    mine, _ = breaches(ours, metric.limits)
    base, _ = breaches(theirs, metric.limits)
    at = f" at {load_label(load)}" if load else ""
    measured = "" if verdict.delta_pct is None else \
        f"; {metric.name} {verdict.delta_pct:+.1f}%"
    if mine and not base:
        key, value = next(iter(mine.items()))
        base_value = median(theirs.samples(key))
        meets = "" if base_value is None else f" (the baseline's {_ms(base_value, key)} meets it)"
        why = "; ".join(f"{breach_text(k, v, metric.limits[k])} limit{at}" for k, v in mine.items())
        return (dataclasses.replace(verdict, verdict="regressed", reason=None,
                                    why=f"{why}{meets}{measured}"),
                f"{breach_text(key, value, metric.limits[key])}")
    if mine and base:
        keys = ", ".join(dict.fromkeys([*mine, *base]))
        why = (f"both break the SLO{at}: "
               + "; ".join(f"{breach_text(k, v, metric.limits[k])} (baseline {_ms(base[k], k)})"
                           if k in base else breach_text(k, v, metric.limits[k])
                           for k, v in mine.items())
               + "".join(f"; the baseline's {breach_text(k, v, metric.limits[k])}"
                         for k, v in base.items() if k not in mine))
        return (dataclasses.replace(verdict, verdict="inconclusive", reason="slo", why=why),
                f"both break {keys}")
    if base and state == "met":
        key, value = next(iter(base.items()))
        why = ("; ".join(f"the baseline's {breach_text(k, v, metric.limits[k])} limit{at}"
                         for k, v in base.items())
               + f"; this one meets it ({_ms(median(ours.samples(key)) or 0.0, key)})"
               + measured)
        return (dataclasses.replace(verdict, verdict="improved", reason=None, why=why),
                f"the baseline breaks {', '.join(base)}")
    return verdict, short


def _overall(levels: list[_Level]) -> Verdict:
    entries = tuple(level.entry() for level in levels)
    if len(levels) == 1:
        return dataclasses.replace(levels[0].verdict, levels=entries)
    names = [level.verdict.verdict for level in levels]
    if "improved" in names and "regressed" in names:
        verdict = "mixed"
    elif "improved" in names or "regressed" in names:
        verdict = "improved" if "improved" in names else "regressed"
    else:
        verdict = next(name for name in PRECEDENCE if name in names)
    first = levels[0].verdict
    same = next((lv.verdict for lv in levels if lv.verdict.verdict == verdict), first)
    failed = verdict in ("failed", "inconclusive")
    return Verdict(
        verdict, same.cause if verdict == "failed" else None, first.value, first.delta_pct,
        _why(levels, verdict, entries), reason=same.reason if failed else None,
        confound=same.confound if failed else None, levels=entries,
    )


def _why(levels: list[_Level], verdict: str, entries: tuple[dict[str, Any], ...]) -> str:
    whys = {level.verdict.why for level in levels}
    if len(whys) == 1 and verdict != "mixed":
        return whys.pop()
    details = ", ".join(f"{load_label(lv.load, short=True)} {lv.short}" for lv in levels)
    if verdict == "mixed":
        cross = crossover(entries)
        assert cross is not None
        return f"{cross['text']}: {details}"
    kinds = list(dict.fromkeys(level.verdict.verdict for level in levels))
    if len(kinds) == 1:
        return f"{verdict} at every level: {details}"
    grouped = "; ".join(
        f"{kind} at {loads_text([lv.load for lv in levels if lv.verdict.verdict == kind])}"
        for kind in kinds)
    return f"{grouped}: {details}"


def crossover(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Where a mixed result's levels change sign: the loads that improved, those that
    regressed, and the text ("improved up to max-concurrency 4, regressed from 16")."""
    up = [i for i, e in enumerate(entries) if e["verdict"] == "improved"]
    down = [i for i, e in enumerate(entries) if e["verdict"] == "regressed"]
    if not up or not down:
        return None
    ups = [dict(entries[i]["load"]) for i in up]
    downs = [dict(entries[i]["load"]) for i in down]
    if max(up) < min(down):
        text = f"improved up to {load_label(ups[-1])}, regressed from {load_number(downs[0])}"
    elif max(down) < min(up):
        text = f"regressed up to {load_label(downs[-1])}, improved from {load_number(ups[0])}"
    else:
        text = f"improved at {loads_text(ups)}, regressed at {loads_text(downs, knob=False)}"
    return {"improved": ups, "regressed": downs, "text": text}


def report_levels(verdict: Verdict) -> list[dict[str, Any]] | None:
    """A verdict's levels as the report and events show them: None without load levels."""
    if not any(entry["load"] for entry in verdict.levels):
        return None
    return [dict(entry) for entry in verdict.levels]


def loads_text(loads: Sequence[Load], *, knob: bool = True) -> str:
    """'max-concurrency 1, 4 and 16' (or '1, 4 and 16' without the knob)."""
    numbers = [load_number(load) for load in loads]
    joined = numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} and {numbers[-1]}"
    name = next(iter(loads[0]), "") if loads else ""
    return f"{name} {joined}" if knob and name else joined


def load_number(load: Load) -> str:
    """A level's number as shown after its knob: '4' for {max-concurrency: 4}."""
    label = load_label(load)
    return label.split(" ", 1)[1] if " " in label else label


def _short(verdict: Verdict) -> str:
    if verdict.delta_pct is not None and verdict.verdict in MEASURED:
        return f"{verdict.delta_pct:+.1f}%"
    if verdict.verdict == "failed":
        return verdict.cause or "failed"
    if verdict.verdict in ("skipped", "cancelled"):
        return "not reached" if verdict.verdict == "skipped" else "cancelled"
    reasons = {"noise": "noisy", "baseline": "baseline failed", "confound": "confound",
               "drift": "drift", "fallback": "fell back", "host-drift": "host drift",
               "one-rep": "one repetition"}
    shown = reasons.get(verdict.reason or "", "inconclusive")
    return f"{verdict.delta_pct:+.1f}% {shown}" if verdict.delta_pct is not None and \
        verdict.reason == "noise" else shown


def breach_text(key: str, value: float, limit: float) -> str:
    """'p99_ttft_ms 1420 ms > 1000 ms'."""
    return f"{key} {_ms(value, key)} > {_ms(limit, key)}"


def _ms(value: float, key: str) -> str:
    shown = f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"
    return with_unit(shown, key)
