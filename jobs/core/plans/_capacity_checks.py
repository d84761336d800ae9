"""A preset's `capacity` checked (docs/contracts.md "Capacity under the SLO"): bad input is one
line naming the key, before anything runs or is stored.

`capacity: {knob: max-concurrency, from: 1, max: 512}` (or `request-rate`, in requests a second
to 0.1) needs an `slo` (what would the capacity be within?), takes the place of `loads` (the
search chooses its own levels), and its knob is set by the search, never by `bench`. `from` may
be left out (1); it is at most `max`. `metric: capacity` (a sweep maximising it) needs a
`capacity` and is higher-is-better.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from jobs.core.capacity import CAPACITY, KNOBS
from jobs.core.plans._bench_checks import LOAD_BOUNDS, shown

Problem = tuple[tuple[Any, ...], str]  # (where in the YAML, one line)
KEYS = ("knob", "from", "max")
EXAMPLE = "e.g. {knob: max-concurrency, from: 1, max: 512}"


def capacity_problems(raw: Any, *, loads: Any, slo: Any, bench: Mapping[str, Any],
                      metric: str, lower_is_better: bool) -> list[Problem]:
    """What is wrong with a preset's `capacity` (and a `metric: capacity` without one); each
    problem one line."""
    if raw is None:
        if metric == CAPACITY:
            return [(("metric",), "key 'metric': capacity needs a 'capacity' search in the "
                                  f"preset ({EXAMPLE}) and an 'slo' to search within")]
        return []
    if not isinstance(raw, Mapping):
        return [(("capacity",), f"key 'capacity' needs a load knob and its range, {EXAMPLE}")]
    for key in raw:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return [(("capacity", key), f"key 'capacity.{key}' is unknown{hint}; capacity "
                                        f"takes {', '.join(KEYS)}")]
    if not slo:
        return [(("capacity",), "key 'capacity' needs an 'slo': the capacity is the most load "
                                "one server carries within it, e.g. slo: {p99_ttft_ms: 3000}")]
    if loads is not None:
        return [(("loads",), "key 'loads' cannot be used with 'capacity': the capacity search "
                             "chooses its own levels (drop loads, or drop capacity)")]
    knob = raw.get("knob")
    if knob is None:
        return [(("capacity",), f"key 'capacity' needs 'knob': {' or '.join(KNOBS)}")]
    if knob not in KNOBS:
        close = difflib.get_close_matches(str(knob), KNOBS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return [(("capacity", "knob"), f"key 'capacity.knob': {knob!r} is not a load knob"
                                       f"{hint}; one of {', '.join(KNOBS)}")]
    if knob in bench:
        return [(("bench", knob), f"key 'bench.{knob}' is set by the capacity search too: drop "
                                  "it from bench")]
    if "max" not in raw:
        return [(("capacity",), f"key 'capacity' needs 'max': the most {knob} the search may "
                                "reach")]
    values = {"from": raw.get("from", 1), "max": raw["max"]}
    for key, value in values.items():
        if (problem := _value_problem(knob, key, value)) is not None:
            return [(("capacity", key), problem)]
    if float(values["from"]) > float(values["max"]):
        return [(("capacity", "from"), f"key 'capacity.from' is {shown(float(values['from']))}, "
                                       f"above capacity.max {shown(float(values['max']))}")]
    if metric == CAPACITY and lower_is_better:
        return [(("lower_is_better",), "key 'lower_is_better': capacity is higher-is-better "
                                       "(more load within the SLO); drop lower_is_better")]
    return []


def _value_problem(knob: str, key: str, value: Any) -> str | None:
    where = f"key 'capacity.{key}'"
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        return f"{where}: {value!r} is not a number"
    if value <= 0:
        return f"{where}: {shown(float(value))} is not positive"
    if knob == "max-concurrency" and value != int(value):
        return f"{where}: {shown(float(value))} is not a whole number of requests"
    if knob == "request-rate" and abs(value * 10 - round(value * 10)) > 1e-9:
        return f"{where}: {shown(float(value))} is finer than the search's 0.1 req/s"
    if (problem := LOAD_BOUNDS[knob].problem(float(value))) is not None:
        return f"{where}: {shown(float(value))} {problem}"
    return None


def normal_capacity(raw: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A checked `capacity` as the plan keeps it: {"knob", "from", "max"}, whole numbers of
    requests as ints."""
    if not raw:
        return None
    knob = str(raw["knob"])
    start, top = float(raw.get("from", 1)), float(raw["max"])
    if knob == "max-concurrency":
        return {"knob": knob, "from": int(start), "max": int(top)}
    return {"knob": knob, "from": round(start, 1), "max": round(top, 1)}


def capacity_warnings(capacity: Mapping[str, Any] | None, *, requests: int | None) -> list[str]:
    """What the plan says before it starts: a concurrency above the requests one run sends
    cannot be reached (the bench never has more requests to run at once)."""
    if not capacity or capacity["knob"] != "max-concurrency" or requests is None:
        return []
    if capacity["max"] <= requests:
        return []
    return [f"capacity.max {capacity['max']} is above the {requests} requests one benchmark "
            f"run sends: a run never has more than {requests} requests at once, so a capacity "
            f"above {requests} cannot be told from {requests} (raise num-prompts)"]
