"""Whether a win is the one its hypothesis predicts (docs/contracts.md "Evidence for the why").

A change declared to free memory for the KV cache (a memory knob, with a hypothesis about
memory or the cache) can only win by that mechanism where the cache limits throughput: with
many requests running and the cache near full. When it wins where one request runs, or where
the baseline's KV cache was far from full, the gain is real but its hypothesis does not explain
it: the why says so, and the adopt step asks to confirm it at the loads that matter.

The evidence is the engine's own: its server metrics (`kv_cache_usage_max`, `running_max`),
else the gauges its log lines carry (`log_gauges` in its engine.yaml), else the load levels the
result improved at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jobs.core.engine_info import describe, engine_of
from jobs.core.plans import load_value
from jobs.core.records import RunRecord
from jobs.core.verdicts._server_quotes import is_memory_change, server_metrics_of
from jobs.core.verdicts._verdicts import Verdict
from jobs.errors import UserError

FAR_FROM_FULL = 0.5  # a KV cache at most this full does not limit how many requests run
_ABOUT_MEMORY = re.compile(r"\b(kv|cache|memory)\b", re.IGNORECASE)


def log_gauges(record: RunRecord) -> dict[str, float]:
    """The largest value of each of the engine's log gauges in the record's log tail."""
    try:
        gauges = describe(engine_of(record.fingerprint, named=record.engine)).log_gauges
    except UserError:
        return {}
    found: dict[str, float] = {}
    for name, spec in gauges.items():
        pattern, scale = re.compile(str(spec["pattern"])), float(spec.get("scale", 1.0))
        values = [float(m.group(1)) * scale for m in pattern.finditer(record.log_tail)]
        if values:
            found[name] = max(values)
    return found


def _load_of(record: RunRecord) -> tuple[float | None, float | None, str]:
    """(KV cache usage at most, requests running at most, where it was read) of a run."""
    metrics = server_metrics_of(record) or {}
    usage, running = metrics.get("kv_cache_usage_max"), metrics.get("running_max")
    if isinstance(usage, int | float) and not isinstance(usage, bool):
        return float(usage), _float(running), "server metrics"
    read = log_gauges(record)
    return read.get("kv_cache_usage"), read.get("running"), "log"


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def unexplained(record: RunRecord, verdict: Verdict, *, baseline: RunRecord) -> str | None:
    """The sentence for a memory change's win that its hypothesis does not explain, or None."""
    if verdict.verdict not in ("improved", "mixed") or not record.hypothesis \
            or not _ABOUT_MEMORY.search(record.hypothesis) \
            or not is_memory_change(record, verdict):
        return None
    said: list[str] = []
    won = [level["load"] for level in verdict.levels
           if level["verdict"] == "improved" and level["load"]]
    if won and all(load_value(load) == 1 and "max-concurrency" in load for load in won):
        said.append("it won at one concurrent request, where the KV cache does not limit "
                    "throughput")
    usage, running, where = _load_of(baseline)
    if usage is not None and usage <= FAR_FROM_FULL:
        with_running = "" if running is None else \
            f" with at most {running:.0f} request{'s' if running != 1 else ''} running"
        said.append(f"the baseline's KV cache was never more than {usage * 100:.0f}% full"
                    f"{with_running} (read from its {where})")
    if not said:
        return None
    return (f"a real gain not explained by its hypothesis (“{record.hypothesis}”): "
            + "; ".join(said))


def unexplained_wins(
    approaches: list[RunRecord], verdicts: list[Verdict], *, baseline: RunRecord
) -> Mapping[str, str]:
    """Approach -> the sentence, for every win its hypothesis does not explain."""
    found = {r.approach: unexplained(r, v, baseline=baseline)
             for r, v in zip(approaches, verdicts, strict=True)}
    return {name: text for name, text in found.items() if text}
