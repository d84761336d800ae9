"""What the engine's own figures say about a result (docs/contracts.md "Evidence for the why",
server metrics): sentences for a `why` from the records' `server_metrics`.

Two figures explain a result often enough to be quoted: a KV cache that was full while a run
that regressed, failed or changed a memory knob ran (the engine queued requests it could not
hold), and an acceptance that fell against the approach's parent (the drafts it grew from
were accepted more often). A record without `server_metrics` is never quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.engine_info import EngineInfo, describe, engine_of
from jobs.core.records import RunRecord
from jobs.core.verdicts._verdicts import Verdict
from jobs.errors import UserError

FULL = 0.99  # a KV-cache usage at or above this is a full cache
FELL = 0.10  # an acceptance this much below the parent's (a share of it) has fallen
MEMORY_CAUSES = frozenset({"out-of-memory"})


def server_metrics_of(record: RunRecord | None) -> Mapping[str, Any] | None:
    found = record.extra.get("server_metrics") if record is not None else None
    return found if isinstance(found, Mapping) else None


def _number(found: Mapping[str, Any] | None, key: str) -> float | None:
    value = found.get(key) if found is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _info(record: RunRecord) -> EngineInfo | None:
    try:
        return describe(engine_of(record.fingerprint, named=record.engine))
    except UserError:
        return None


def is_memory_change(record: RunRecord, verdict: Verdict) -> bool:
    """Whether the approach changed a server arg that sizes the KV cache or the batch (the
    engine's `memory_args`), or failed for want of memory."""
    if verdict.cause in MEMORY_CAUSES:
        return True
    info = _info(record)
    knobs = {str(a) for a in info.server_metrics.get("memory_args") or ()} if info else set()
    return any(k.lstrip("-").replace("_", "-") in knobs
               for k in record.change.get("server_args", {}))


def kv_full_sentence(record: RunRecord, verdict: Verdict,
                     others: Mapping[str, RunRecord]) -> str | None:
    """The KV cache was full during a regressed, failed or memory-knob run; None otherwise."""
    mine = server_metrics_of(record)
    usage = _number(mine, "kv_cache_usage_max")
    if usage is None or usage < FULL:
        return None
    if verdict.verdict not in ("regressed", "failed") and not is_memory_change(record, verdict):
        return None
    text = f"the KV cache was full ({usage * 100:.0f}%) during its runs"
    queued = _number(mine, "queued_max")
    if queued:
        text += f", with up to {queued:.0f} requests queued"
    for name in (record.parent, "baseline"):
        theirs = _number(server_metrics_of(others.get(name) if name else None),
                         "kv_cache_usage_max")
        if theirs is not None:
            if theirs < FULL:
                text += f" ({name}'s peaked at {theirs * 100:.0f}%)"
            break
    return text


def accept_fell_sentence(record: RunRecord, others: Mapping[str, RunRecord]) -> str | None:
    """The acceptance rate (else the accept length) the engine counted fell by FELL or more
    against the parent's; None otherwise."""
    parent = others.get(record.parent) if record.parent else None
    mine, theirs = server_metrics_of(record), server_metrics_of(parent)
    for key, called in (("accept_rate", "acceptance rate"), ("accept_length", "accept length")):
        now, then = _number(mine, key), _number(theirs, key)
        if now is None or then is None or then <= 0:
            continue
        if now <= then * (1.0 - FELL):
            return f"its {called} fell to {now:.2f} from {record.parent}'s {then:.2f}"
        return None
    return None


def server_sentences(record: RunRecord, verdict: Verdict,
                     others: Mapping[str, RunRecord]) -> list[str]:
    """The server-metrics sentences of an approach's why, in order; empty without them."""
    if server_metrics_of(record) is None:
        return []
    said = [kv_full_sentence(record, verdict, others), accept_fell_sentence(record, others)]
    return [s for s in said if s]
