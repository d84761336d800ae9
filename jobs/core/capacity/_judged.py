"""A configuration's capacity against the baseline's (docs/contracts.md "Capacity under the
SLO"), and the words every surface uses for it.

Improved or regressed when the two capacities differ by at least one bisection step (the
coarser search precision of the two: 2% of the load or one unit) and by at least the preset's
`min_effect_pct`; otherwise unchanged. A configuration that breaks the SLO even at `from` has no
capacity: below any baseline that has one. Two configurations that both hold up to `max` carry
at least that much each, and the search cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.capacity._record import Found
from jobs.core.capacity._search import Spec
from jobs.core.units import with_unit


@dataclass(frozen=True)
class CapacityVerdict:
    """One configuration's capacity judged against the baseline's."""

    verdict: str
    value: float | None
    delta_pct: float | None
    binding: str | None
    why: str

    def entry(self, *, goodput: float | None = None, goodput_key: str = "") -> dict[str, Any]:
        """As a report's result keeps it."""
        return {"value": self.value, "delta_pct": self.delta_pct, "verdict": self.verdict,
                "binding": self.binding, "why": self.why, "goodput": goodput,
                "goodput_key": goodput_key or None}


def number(spec: Spec, value: float | None) -> str:
    """'24' requests, '2.4' req/s ('none' without a value)."""
    if value is None:
        return "none"
    return f"{spec.as_load(value):g}"


def amount(spec: Spec, value: float | None) -> str:
    """'24 concurrent requests', '1 concurrent request', '2.4 requests a second'."""
    if value is None:
        return "nothing"
    shown = number(spec, value)
    if spec.knob == "max-concurrency":
        return f"{shown} concurrent request{'' if shown == '1' else 's'}"
    return f"{shown} request{'' if shown == '1' else 's'} a second"


def short(spec: Spec, value: float | None) -> str:
    """'c=24', '2.4 req/s' (a chart's or a table's cell)."""
    if value is None:
        return "none"
    shown = number(spec, value)
    return f"c={shown}" if spec.knob == "max-concurrency" else f"{shown} req/s"


def pct(delta: float) -> str:
    """'−40%', '+12.5%' (one decimal at most; a true minus sign)."""
    text = f"{abs(delta):.1f}".removesuffix(".0")
    return f"{'−' if delta < 0 else '+'}{text}%"


def step(spec: Spec, *values: float | None) -> float:
    """One bisection step at these capacities: the coarser precision of the two."""
    return max(spec.precision(v or 0.0) for v in values) if values else spec.unit


def breach_words(broken: Mapping[str, float | None], slo: Mapping[str, float]) -> str:
    """'p99_ttft_ms 3600 ms > 3000 ms' for each key broken ('not measured' without a median)."""
    out = []
    for key, found in broken.items():
        limit = slo.get(key)
        if found is None or limit is None:
            out.append(f"{key} not measured")
        else:
            out.append(f"{key} {with_unit(_figure(found), key)} > "
                       f"{with_unit(_figure(limit), key)}")
    return "; ".join(out)


def _figure(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"


def binds_text(found: Found) -> str:
    """'p99_ttft_ms binds' or, when nothing broke up to max, 'nothing breaks up to
    max-concurrency 512'; '' when the search ended before it could say."""
    if found.binding is not None:
        return f"{found.binding} binds"
    if found.at_max:
        return f"nothing breaks up to {found.spec.knob} {number(found.spec, found.spec.max)}"
    return ""


def carries(name: str, found: Found, slo: Mapping[str, float]) -> str:
    """'eagle3 carries 24 concurrent requests within the SLO' (or breaks it even at `from`)."""
    spec = found.spec
    if found.value is None:
        level = found.level_at(spec.start)
        broken = breach_words(found.broken_at(spec.start), slo) if level else ""
        return (f"{name} breaks the SLO even at {spec.knob} {number(spec, spec.start)}"
                + (f" ({broken})" if broken else ""))
    least = "at least " if found.at_max else ""
    return f"{name} carries {least}{amount(spec, found.value)} within the SLO"


def judge_capacity(ours: Found, theirs: Found | None, *, name: str, min_effect_pct: float,
                   slo: Mapping[str, float], closing: Found | None = None) -> CapacityVerdict:
    """Our capacity against the baseline's (None: the baseline has none to compare with);
    `closing`: the baseline's closing run's, when the batch measured it again last: a change
    no larger than the baseline's own move between its two runs is inconclusive."""
    spec = ours.spec
    lead = carries(name, ours, slo)
    binds = binds_text(ours)
    tail = f"; {binds}" if binds else ""
    if theirs is None:
        return CapacityVerdict("inconclusive", ours.value, None, ours.binding,
                               f"{lead}; the baseline found no capacity to compare with{tail}")
    base = "the baseline" if theirs.value is not None else "the baseline breaks it even at " \
        f"{spec.knob} {number(spec, spec.start)}"
    shown = f"{lead}, {base}" + (f" {number(spec, theirs.value)}" if theirs.value is not None
                                 else "")
    if ours.value is None and theirs.value is None:
        return CapacityVerdict("inconclusive", None, None, ours.binding,
                               f"{lead}, and so does the baseline: start lower (capacity.from)")
    if ours.value is None or theirs.value is None:
        verdict = "regressed" if ours.value is None else "improved"
        return CapacityVerdict(verdict, ours.value, None, ours.binding,
                               f"{shown}: {verdict}{tail}")
    delta = round((ours.value - theirs.value) / theirs.value * 100.0, 1) \
        if theirs.value else None
    if ours.at_max and theirs.at_max:
        return CapacityVerdict("unchanged", ours.value, delta, ours.binding,
                               f"{shown}: unchanged (both hold up to the most the search "
                               f"tries, {spec.knob} {number(spec, spec.max)})")
    apart = abs(ours.value - theirs.value)
    one = step(spec, ours.value, theirs.value)
    if delta is None or apart + 1e-9 < one:
        return CapacityVerdict("unchanged", ours.value, delta, ours.binding,
                               f"{shown}: unchanged (within one bisection step, "
                               f"{_step_text(spec, one)}){tail}")
    moved = _moved(theirs, closing)
    if moved is not None and apart <= abs(moved) + one + 1e-9:
        return CapacityVerdict(
            "inconclusive", ours.value, delta, ours.binding,
            f"{shown}, but the baseline's own capacity moved from {number(spec, theirs.value)} "
            f"to {number(spec, theirs.value + moved)} between its first and last runs: a "
            f"change within that is inconclusive{tail}")
    if abs(delta) < min_effect_pct:
        return CapacityVerdict("unchanged", ours.value, delta, ours.binding,
                               f"{shown}: unchanged ({pct(delta)} is below the "
                               f"{min_effect_pct:g}% minimum effect){tail}")
    verdict = "improved" if delta > 0 else "regressed"
    return CapacityVerdict(verdict, ours.value, delta, ours.binding,
                           f"{shown}: {verdict} {pct(delta)}{tail}")


def _moved(first: Found, closing: Found | None) -> float | None:
    """How far the baseline's capacity moved between its first and closing runs, when by at
    least one bisection step; None otherwise."""
    if closing is None or first.value is None or closing.value is None:
        return None
    moved = closing.value - first.value
    return moved if abs(moved) + 1e-9 >= step(first.spec, first.value, closing.value) else None


def _step_text(spec: Spec, one: float) -> str:
    """'1 request', '2 requests', '0.1 req/s'."""
    shown = number(spec, one)
    if spec.knob == "max-concurrency":
        return f"{shown} request{'' if shown == '1' else 's'}"
    return f"{shown} req/s"


def not_judged(found: Found | None, *, verdict: str, why: str) -> CapacityVerdict:
    """A capacity the batch cannot judge: the run failed, was cancelled, or its comparison with
    the baseline is void (a confound, another stack, a fallback)."""
    return CapacityVerdict(verdict, None if found is None else found.value, None,
                           None if found is None else found.binding, why)
