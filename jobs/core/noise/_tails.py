"""Tail percentiles and the requests they need (docs/contracts.md "Noise, measured").

A p99 over 8 requests is the slowest request, not a p99: a percentile p needs at least
100 / (100 - p) requests in one benchmark run before it means anything (100 for p99, 20 for p95,
10 for p90). Keys are the benchmark clients' own names (`p99_ttft_ms`, `p95_itl_ms`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)_")


def percentile_of(key: str) -> float | None:
    """99.0 for `p99_ttft_ms`, 99.9 for `p99.9_itl_ms`; None for a key that is no percentile
    (a median is the 50th, and any number of requests has one)."""
    match = _PERCENTILE.match(key)
    if match is None:
        return None
    value = float(match.group(1))
    return value if 50 < value < 100 else None


def needed_requests(key: str) -> int | None:
    """The fewest requests a run needs for `key` to be the percentile it names; None for a key
    that is no tail percentile."""
    percent = percentile_of(key)
    if percent is None:
        return None
    return math.ceil(round(100.0 / (100.0 - percent), 9))


def few_samples_caveat(key: str, requests: int | None) -> str | None:
    """"p99 of 8 requests: the slowest" when `requests` are too few for `key`; else None."""
    needed = needed_requests(key)
    if needed is None or requests is None or requests >= needed:
        return None
    percent = percentile_of(key)
    assert percent is not None
    return f"p{percent:g} of {requests} request{'s' if requests != 1 else ''}: the slowest"


def slo_sample_problem(keys: Iterable[str], *, requests: int) -> str | None:
    """Why an SLO on `keys` cannot be judged on runs of `requests` requests (the first key that
    needs more), or None when every key has enough."""
    for key in keys:
        needed = needed_requests(key)
        if needed is not None and requests < needed:
            percent = percentile_of(key)
            return (f"slo.{key}: a p{percent:g} needs at least {needed} requests per run, and "
                    f"the bench sends {requests} (its p{percent:g} would be the slowest "
                    "request); raise num-prompts, limit another key, or set "
                    "`allow_few_samples: true` to judge it anyway, marked")
    return None
