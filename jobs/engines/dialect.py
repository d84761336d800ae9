"""What one served engine says differently from another (`Dialect`), and the settings every
served engine's benchmark shares: a seed per repetition, the number of prompts sent, the
sampling its requests carry (docs/contracts.md "Run record": `sampling`)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from jobs.core.plans import RunConfig
from jobs.engines.flags import to_flag


class Dialect(Protocol):
    """What one served engine says differently."""

    python: str  # the interpreter that has the engine
    env: Mapping[str, str]  # its stack's environment (docs/contracts.md "Stacks"), else empty
    bench_name: str  # how messages name its benchmark
    ready_line: str | None  # a log line that means ready (besides /health answering 200)
    metrics: tuple[str, ...]  # the benchmark's figures a record keeps

    def server_argv(self, port: int, config: RunConfig) -> list[str]: ...

    def bench_argv(self, port: int, out_file: Path, bench: Mapping[str, Any]) -> list[str]: ...

    def bench_settings(self, bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]: ...

    def prompts_sent(self, bench: Mapping[str, Any]) -> int: ...

    def read_result(self, out_file: Path) -> dict[str, Any] | None: ...

    def before_repetition(self, port: int, opener: urllib.request.OpenerDirector) -> str | None:
        """Reset what must not carry over between repetitions; why it failed, or None."""
        ...

    def counters(self, port: int, opener: urllib.request.OpenerDirector) -> dict[str, float]:
        """The server's counters the accept length may come from (empty: none)."""
        ...

    def accept_length(self, result: Mapping[str, Any], before: Mapping[str, float],
                      after: Mapping[str, float]) -> float | None: ...

    def sampling(self, bench: Mapping[str, Any]) -> dict[str, Any]:
        """The sampling every request of the benchmark carries (`sampled`'s shape)."""
        ...


def seeded(bench: Mapping[str, Any], *, rep: int) -> dict[str, Any]:
    """The preset's bench settings for repetition `rep` (0: the warm-up, after all of them): a
    seed of its own, never negative (benchmarks seed numpy with it)."""
    args = {k: v for k, v in bench.items() if to_flag(k) != "--seed"}
    given = next((v for k, v in bench.items() if to_flag(k) == "--seed"), 1)
    try:
        first = int(given)
    except (TypeError, ValueError):
        first = 1
    args["seed"] = first + rep - 1
    return args


def prompts_given(bench: Mapping[str, Any], *, default: int) -> int:
    given = next((v for k, v in bench.items() if to_flag(k) == "--num-prompts"), None)
    try:
        return int(given) if given is not None else default
    except (TypeError, ValueError):
        return default


def is_real(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def figures(result: Mapping[str, Any], metric: str, usual: tuple[str, ...]) -> dict[str, float]:
    """The benchmark's figures the record keeps: the usual ones and the plan's metric."""
    keys = dict.fromkeys((*usual, metric))
    return {k: float(v) for k in keys if is_real(v := result.get(k))}


# The sampling parameters a record names, as the engines' requests spell them (the bench flags
# are the same words with dashes: --top-p, --repetition-penalty...).
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
                 "repetition_penalty")


def bench_value(bench: Mapping[str, Any], key: str) -> Any:
    """The value the preset's bench gives the flag of `key` (`top_p`, `top-p`), or None."""
    flag = to_flag(key)
    return next((v for k, v in bench.items() if to_flag(k) == flag), None)


def json_value(value: Any) -> dict[str, Any]:
    """A JSON-object bench value (written as a mapping, or as its JSON text); {} otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


def sampled(sent: Mapping[str, Any]) -> dict[str, Any]:
    """A record's `sampling`: the sampling parameters of `sent` (a request's, or the flags that
    make them), numbers as numbers; `temperature` always, None when no temperature is sent (the
    server's default sampling applies), the others only when sent."""
    out: dict[str, Any] = {"temperature": None}
    for key in SAMPLING_KEYS:
        value = sent.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            out[key] = int(value) if key == "top_k" else float(value)
        except (TypeError, ValueError):
            out[key] = value
    return out
