"""The sampling every request of `vllm bench serve` carries, as the installed release sends it
(docs/contracts.md "Run record": `sampling`).

vllm/benchmarks/serve.py (0.33.0) main_async, :2227-2261: the sampling parameters are the bench
flags given (--top-p, --top-k, --min-p, --temperature, --frequency-penalty, --presence-penalty,
--repetition-penalty; each None unless given) and --extra-body's keys win over them; the
completions request (benchmarks/lib/endpoint_request_func.py:226-239) carries them beside a
fixed `repetition_penalty: 1.0` (no penalty, left out of the record unless a preset sets it).
Without --temperature it sends none: "WARNING: vllm bench serve no longer sets temperature==0
(greedy) in requests by default. The default will be determined on the server side ..." (the
server's default sampling, from the model's generation config). Releases before 0.15.0 set
`temperature` 0.0 themselves when none was given (0.14.0 serve.py:1636; vLLM PR #32723 removed
it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jobs.engines.dialect import SAMPLING_KEYS, bench_value, json_value, sampled

GREEDY_UNTIL = (0, 15, 0)  # the first release that no longer sends temperature 0 by itself


def _at(version: str | None) -> tuple[int, ...] | None:
    found = re.match(r"^(\d+)\.(\d+)\.(\d+)", (version or "").strip())
    return tuple(int(p) for p in found.groups()) if found else None


def sampling(bench: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """The sampling of every request bench serve sends with these settings on `version` (an
    unknown version is taken as 0.33's behaviour)."""
    sent = {key: value for key in SAMPLING_KEYS
            if (value := bench_value(bench, key)) is not None}
    at = _at(version)
    if "temperature" not in sent and at is not None and at < GREEDY_UNTIL:
        sent["temperature"] = 0.0
    extra = json_value(bench_value(bench, "extra-body"))
    sent.update({k: v for k, v in extra.items() if k in SAMPLING_KEYS})
    return sampled(sent)
