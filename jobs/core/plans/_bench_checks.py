"""What a preset asks of its engine's benchmark, checked before anything runs (docs/contracts.md
"Bounded work and any file").

`bench_problems`: `num-prompts: 1000000000` would hold a GPU host for weeks and
`random-output-len: 1e12` never ends, so a count of requests, a token length, a concurrency or a
request rate outside what any real benchmark asks is refused at load time (exit 2, one line
naming the key, its line and the bound). Which bench flag counts what is the engine's fact
(`bench_bounds` in its engine.yaml); a flag not listed there is the engine's business.

`metric_problems`: the metric a batch is judged by must be a key the engine's benchmark reports
(`result_keys` in its engine.yaml); `metric: tokens_per_banana` would run the whole batch and
fail every configuration for want of a sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.limits import (
    MAX_CONCURRENCY,
    MAX_PROMPTS,
    MAX_REQUEST_RATE,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
)
from jobs.errors import did_you_mean

Problem = tuple[tuple[Any, ...], str]  # (where in the YAML, one line)


@dataclass(frozen=True)
class Bound:
    """What a bench number counts, and the range it must be in."""

    unit: str
    low: float
    high: float
    whole: bool = True  # a count: a whole number (else the engine's types refuse it)
    low_open: bool = False  # more than `low` (a rate), not at least
    infinite_ok: bool = False  # inf means "all at once" (request-rate)

    def problem(self, value: float) -> str | None:
        """Why `value` is outside the range (a value of the wrong type is the engine's types'
        to refuse, in their words: None here)."""
        if (self.infinite_ok and value == math.inf) or not math.isfinite(value) \
                or (self.whole and value != int(value)):
            return None
        if value < self.low or (self.low_open and value == self.low) or value > self.high:
            return f"must be {self.range_text()}"
        return None

    def range_text(self) -> str:
        if self.low_open:
            text = f"more than {shown(self.low)} and at most {shown(self.high)} {self.unit}"
        else:
            text = f"from {shown(self.low)} to {shown(self.high)} {self.unit}"
        return f"{text}, or inf" if self.infinite_ok else text


BOUNDS: dict[str, Bound] = {
    "requests": Bound("requests", 1, MAX_PROMPTS),
    "some-requests": Bound("requests", 0, MAX_PROMPTS),
    "tokens": Bound("tokens", 0, MAX_TOKENS),
    "concurrency": Bound("requests at once", 1, MAX_CONCURRENCY),
    "rate": Bound("requests a second", 0, MAX_REQUEST_RATE, whole=False, low_open=True,
                  infinite_ok=True),
    "finite-rate": Bound("requests a second", 0, MAX_REQUEST_RATE, whole=False, low_open=True),
    "seconds": Bound("seconds", 0, MAX_TIMEOUT_S, whole=False),
}
"""The kinds of bench numbers, each with its bounds: an engine's engine.yaml says which of its
bench flags is which (`bench_bounds`), and a load level's knob is `concurrency` or `rate`."""

LOAD_BOUNDS = {"max-concurrency": BOUNDS["concurrency"], "request-rate": BOUNDS["finite-rate"]}


def bench_problems(bench: Mapping[str, Any], *, engine: str) -> list[Problem]:
    """What is wrong with a preset's bench numbers (empty: nothing); each problem one line."""
    kinds = describe(engine).bench_bounds
    for key, raw in bench.items():
        kind = kinds.get(key.lstrip("-").replace("_", "-"))
        value = _number(raw)
        if kind is None or value is None:
            continue  # not bounded, or not a number (the engine's types refuse it)
        problem = BOUNDS[kind].problem(value)
        if problem is not None:
            got = repr(raw) if isinstance(raw, str) else shown(value)
            return [(("bench", key), f"key 'bench.{key}' {problem}, got {got}")]
    return []


def _number(raw: Any) -> float | None:
    """A bench value as a number: YAML's int or float, or a string that reads as one."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return None
    return None


def shown(value: float) -> str:
    """A bound or a value as a message writes it: 100,000; 0.5; 1e+12."""
    if not math.isfinite(value) or abs(value) >= 1e15:
        return f"{value:g}"
    return f"{int(value):,}" if value == int(value) else f"{value:,}"


def metric_problems(metric: str, *, engine: str) -> list[Problem]:
    """Why a preset's `metric` is no key its engine's benchmark reports (empty: it is one)."""
    info = describe(engine)
    if info.reports(metric):
        return []
    usual = ", ".join(info.metrics or info.result_keys[:6])
    known = list(dict.fromkeys((*info.result_keys, *info.metrics, *info.slo_keys)))
    return [(("metric",), f"key 'metric': {info.in_text}'s benchmark reports no {metric!r}"
                          f"{did_you_mean(metric, known)}; a metric is one of "
                          f"its result keys, e.g. {usual} (config/engines/{info.name}/"
                          "engine.yaml, result_keys)")]
