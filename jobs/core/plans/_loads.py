"""Load levels and service-level objectives (docs/contracts.md "Load levels and service-level
objectives").

A preset's `loads` names one bench knob (`max-concurrency` or `request-rate`) and its levels;
each configuration's server starts once and is benchmarked at every level, lowest first. Its
`slo` holds upper limits on keys the engine's benchmark reports (`p99_ttft_ms: 1000`). This
module checks both (bad input is one line naming the key) and answers what every other part
asks of them: the levels of a plan, the bench settings at a level, how a level is named.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.plans._bench_checks import LOAD_BOUNDS, shown

LOAD_KNOBS = ("max-concurrency", "request-rate")
MAX_LEVELS = 16
"""The most levels a preset's `loads` may list: each is a bench run per repetition per server."""

Load = dict[str, Any]  # {knob: level}; {} for a batch without loads (the bench's own setting)
Problem = tuple[tuple[Any, ...], str]  # (where in the YAML, one line)


def levels_of(loads: Mapping[str, Sequence[Any]] | None) -> list[Load]:
    """Every level of `loads` as its own setting, lowest first; [{}] without loads."""
    if not loads:
        return [{}]
    (knob, values), = loads.items()
    return [{knob: value} for value in values]


def bench_at(bench: Mapping[str, Any], load: Mapping[str, Any]) -> dict[str, Any]:
    """The preset's bench settings at one level: the level's knob set (or replaced)."""
    return {**bench, **load}


def load_label(load: Mapping[str, Any], *, short: bool = False) -> str:
    """'max-concurrency 4' (or 'c=4' / 'rate=2' with `short`); '' without a level."""
    if not load:
        return ""
    (knob, value), = load.items()
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    if short:
        return f"{'c' if knob == 'max-concurrency' else 'rate'}={shown}"
    return f"{knob} {shown}"


def load_value(load: Mapping[str, Any]) -> float | None:
    """A level's number (4 for {max-concurrency: 4}); None without a level."""
    if not load:
        return None
    (value,) = load.values()
    return float(value)


def load_problems(raw: Any, *, bench: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with a preset's `loads` (empty: nothing); each problem one line."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping) or len(raw) != 1:
        got = ", ".join(map(str, raw)) if isinstance(raw, Mapping) and raw else "none"
        return [(("loads",), f"key 'loads' needs exactly one bench knob, "
                             f"{' or '.join(LOAD_KNOBS)}, with its levels; got {got}")]
    (knob, values), = raw.items()
    where = ("loads", knob)
    if knob not in LOAD_KNOBS:
        return [(where, f"key 'loads': {knob!r} is not a load knob{_hint(knob, LOAD_KNOBS)}; "
                        f"one of {', '.join(LOAD_KNOBS)}")]
    if knob in bench:
        return [(("bench", knob), f"key 'bench.{knob}' is set by 'loads' too: give its levels "
                                  f"in loads.{knob} only")]
    if not isinstance(values, list) or not values:
        return [(where, f"key 'loads.{knob}' needs a list of levels, lowest first, e.g. "
                        "[1, 4, 16, 64]")]
    if len(values) > MAX_LEVELS:
        return [(where, f"key 'loads.{knob}' lists {len(values)} levels; at most {MAX_LEVELS} "
                        "(each is a bench run per repetition per server)")]
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            return [(where, f"key 'loads.{knob}': level {value!r} is not a number")]
        if value <= 0:
            return [(where, f"key 'loads.{knob}': level {value!r} is not positive")]
        if knob == "max-concurrency" and value != int(value):
            return [(where, f"key 'loads.{knob}': level {value!r} is not a whole number of "
                            "requests")]
        if (problem := LOAD_BOUNDS[knob].problem(float(value))) is not None:
            return [(where, f"key 'loads.{knob}': level {shown(value)} {problem}")]
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        return [(where, f"key 'loads.{knob}' lists {', '.join(f'{v:g}' for v in repeated)} "
                        "more than once; each level once, lowest first")]
    if values != sorted(values):
        return [(where, f"key 'loads.{knob}' is not in order: {values}; list the levels "
                        f"lowest first ({sorted(values)})")]
    return []


def slo_problems(raw: Any, *, engine: str) -> list[Problem]:
    """What is wrong with a preset's `slo`: each key must be one the engine's benchmark
    reports (`slo_keys` in its engine.yaml), each limit a positive number."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping) or not raw:
        return [(("slo",), "key 'slo' needs limits, e.g. {p99_ttft_ms: 1000, "
                           "median_tpot_ms: 60}")]
    info = describe(engine)
    known = info.slo_keys
    for key, limit in raw.items():
        where = ("slo", key)
        if key not in known:
            return [(where, f"key 'slo.{key}': {info.in_text}'s benchmark reports no {key!r}"
                            f"{_hint(key, known)}; an SLO limits one of {', '.join(known)}")]
        if isinstance(limit, bool) or not isinstance(limit, int | float) \
                or not math.isfinite(limit):
            return [(where, f"key 'slo.{key}': the limit {limit!r} is not a number")]
        if limit <= 0:
            return [(where, f"key 'slo.{key}': the limit {limit!r} is not positive")]
    return []


def _hint(word: Any, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def normal_loads(raw: Mapping[str, Sequence[Any]] | None) -> dict[str, list[int | float]] | None:
    """A checked `loads` as the plan keeps it: whole numbers as ints."""
    if not raw:
        return None
    (knob, values), = raw.items()
    return {knob: [int(v) if float(v) == int(v) else float(v) for v in values]}
