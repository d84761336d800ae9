"""The root cause of a batch's failures (docs/contracts.md "Verdict rules"): the cause shared by
the most `failed` approaches, when at least 2 share it and they are at least half of the
failures, with the evidence in words."""

from __future__ import annotations

from collections import Counter
from typing import Any

from jobs.core.advice._next_steps import cause_rank
from jobs.core.records import RunRecord
from jobs.core.verdicts import Verdict


def root_cause(
    approaches: list[RunRecord], verdicts: list[Verdict], *, baseline: RunRecord
) -> dict[str, Any] | None:
    failed = [(r, v) for r, v in zip(approaches, verdicts, strict=True) if v.verdict == "failed"]
    counts = Counter(v.cause for _, v in failed if v.cause)
    if not counts:
        return None
    cause, count = min(counts.items(), key=lambda kv: (-kv[1], cause_rank(kv[0])))
    if count < 2 or count * 2 < len(failed):
        return None
    names = [r.approach for r, v in failed if v.cause == cause]
    return {
        "cause": cause,
        "count": count,
        "of": len(failed),
        "approaches": names,
        "text": _root_text(cause, count=count, of=len(failed), names=names, baseline=baseline),
    }


def _root_text(cause: str, *, count: int, of: int, names: list[str], baseline: RunRecord) -> str:
    fp = baseline.fingerprint
    gpu = fp.get("gpu") or "this GPU"
    lead = f"{count} of {of} failures share {cause} ({', '.join(names)})"
    if cause == "arch-unsupported":
        cc = fp.get("compute_capability")
        arch = f"compute capability {cc}" if cc else "this GPU's architecture"
        return (
            f"{lead}: {gpu} ({arch}) is too new for the kernels and architecture tables of "
            "these backends; the ecosystem has not caught up with the hardware"
        )
    if cause == "out-of-memory":
        return f"{lead}: the configurations do not fit the memory of {gpu}"
    if cause == "nccl-error":
        link = fp.get("interconnect") or "this interconnect"
        return f"{lead}: the collectives fail over {link} on {gpu}"
    if cause == "cuda-graph-incompatible":
        return f"{lead}: the changes are not safe to capture in CUDA graphs"
    return lead
