"""How a stand-in server's speed depends on its load, as a GPU server's does: one model for the
SGLang and the vLLM stand-ins (both import it as `standin_load`; tests/standin is on their path).

One request decodes at STANDIN_THROUGHPUT tokens/s; each other request running beside it slows
everyone's decode by STANDIN_BATCH_COST (default 0.05), so c requests together make
c / (1 + 0.05 (c - 1)) times one request's tokens/s (sublinear), and the time to the first token
grows by STANDIN_TTFT_GROWTH (default 0.1) per other request. A speculative server decodes
(1 + STANDIN_SPEC_GAIN) / (1 + STANDIN_SPEC_DECAY log2 c) times as fast as a plain one: its
draft work is free while the GPU idles at one request and pure overhead once it is busy (gain
default 0, as before load levels; decay default 0.25: with gain 0.6 it wins by 60 % at 1 request
and 7 % at 4, and loses 20 % at 16). STANDIN_FATAL_AT_RUNNING: when that many requests run at
once the server logs its fatal line (STANDIN_FATAL), as one that runs out of memory under load.
A served first token (`first_token`) waits for the most requests in flight while it waits, not
those at its arrival: a level's first c requests arrive one by one, and counted at arrival they
would see 1, 2, ... c, as many as the machine's speed let in before them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


def speed(running: float, *, speculative: bool, gain: float | None = None) -> float:
    """One request's decode speed with `running` requests, as a share of STANDIN_THROUGHPUT;
    `gain`: the speculative gain of these requests (`standin_traffic`), else STANDIN_SPEC_GAIN."""
    c = max(1.0, running)
    factor = 1.0 / (1.0 + _env("STANDIN_BATCH_COST", 0.05) * (c - 1.0))
    if speculative:
        gain = _env("STANDIN_SPEC_GAIN", 0.0) if gain is None else gain
        factor *= (1.0 + gain) / (
            1.0 + _env("STANDIN_SPEC_DECAY", 0.25) * math.log2(c))
    return factor


def ttft_factor(running: float) -> float:
    return 1.0 + _env("STANDIN_TTFT_GROWTH", 0.1) * (max(1.0, running) - 1.0)


def first_token(running: Callable[[], int], ttft_s: float) -> int:
    """Wait until a request's first token is due: `ttft_s` times ttft_factor(the most requests
    `running()` counted since it arrived), counted anew every 10 ms; that most, returned."""
    arrived = time.monotonic()
    most = running()
    while (left := arrived + ttft_s * ttft_factor(most) - time.monotonic()) > 0:
        time.sleep(min(left, 0.01))
        most = max(most, running())
    return most


def dies_at(running: int) -> bool:
    """Whether `running` requests at once are more than this server survives."""
    limit = int(os.environ.get("STANDIN_FATAL_AT_RUNNING") or 0)
    return 0 < limit <= running
