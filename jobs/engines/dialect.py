"""What one served engine says differently from another (`Dialect`), and the settings every
served engine's benchmark shares: a seed per repetition, the number of prompts sent."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from jobs.core.plans import RunConfig
from jobs.engines.flags import to_flag


class Dialect(Protocol):
    """What one served engine says differently."""

    python: str  # the interpreter that has the engine
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
