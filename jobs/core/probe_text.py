"""A collectives probe's result (docs/contracts.md's probe JSON) as JSON or as a small aligned
table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs.core.units import human_size

COLUMNS = ("size", "latency (us)", "algbw (GB/s)", "busbw (GB/s)")


def to_json(result: Mapping[str, Any]) -> str:
    return json.dumps(result, indent=2) + "\n"


def to_text(result: Mapping[str, Any]) -> str:
    """The heading (ranks, backend, environment), then one row per size."""
    env = result.get("env") or {}
    lines = [f"all_reduce over {result['world']} ranks ({result['backend']}), median of "
             f"{result.get('iters', '?')} iterations per size after "
             f"{result.get('warmup', '?')} warm-up",
             "env: " + (" ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(none set)")]
    rows = [COLUMNS] + [
        (human_size(int(s["bytes"])), f"{s['latency_us']:.1f}", f"{s['algbw_gbps']:.3f}",
         f"{s['busbw_gbps']:.3f}")
        for s in result["sizes"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines.append("")
    for row in rows:
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    return "\n".join(lines) + "\n"


def render(result: Mapping[str, Any], fmt: str) -> str:
    return to_json(result) if fmt == "json" else to_text(result)


def asked_text(request: Mapping[str, Any]) -> str:
    """A queued probe's request in words: "all_reduce over 2 ranks (gloo), 6 sizes from 4 KiB to
    4 MiB, 20 iterations each, env NCCL_ALGO=Ring"; the backend reads "nccl or gloo, as the host
    has GPUs" until the host chose it."""
    sizes = [int(s) for s in request.get("sizes", ())]
    backend = request.get("backend") or "nccl or gloo, as the host has GPUs"
    span = (human_size(sizes[0]) if len(sizes) == 1 else
            f"{len(sizes)} sizes from {human_size(sizes[0])} to {human_size(sizes[-1])}")
    env = dict(request.get("env") or ())
    text = (f"all_reduce over {request.get('world')} ranks ({backend}), {span}, "
            f"{request.get('iters')} iterations each")
    return text + (", env " + " ".join(f"{k}={v}" for k, v in sorted(env.items())) if env else "")


def peak_busbw(result: Mapping[str, Any]) -> float | None:
    """The highest busbw over a probe's sizes (GB/s), None without any size."""
    return max((float(s["busbw_gbps"]) for s in result.get("sizes") or ()), default=None)
