"""`vllm bench serve`'s numbers: calculate_metrics, the result block and the spec-decode deltas.

As vllm/benchmarks/serve.py (0.33.0): TTFT, TPOT (latency - TTFT over the tokens after the
first) and ITL per request, mean/median/std and the --metric-percentiles of the
--percentile-metrics (default ttft,tpot,itl; p99), output_throughput = generated tokens /
duration, total_token_throughput with the prompt tokens; the `Serving Benchmark Result` block;
spec_decode_* from the server's counters before and after the main run (serve.py:1133-1171).
"""

from __future__ import annotations

import argparse
import math
import statistics

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any


def percentile(values: list[float], p: float) -> float:
    """numpy.percentile's default (linear) of `values or [0]`."""
    data = sorted(values) or [0.0]
    rank = (len(data) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def metrics(outputs: list[dict[str, Any]], duration: float, percentiles: list[float],
            selected: list[str]) -> dict[str, Any]:
    done = [o for o in outputs if o["success"]]
    total_in = sum(o["prompt_len"] for o in done)
    total_out = sum(o["output_tokens"] or 1 for o in done)
    series = {
        "ttft": [o["ttft"] for o in done],
        "tpot": [(o["latency"] - o["ttft"]) / (o["output_tokens"] - 1) for o in done
                 if (o["output_tokens"] or 0) > 1],
        "itl": [x for o in done for x in o["itl"]],
        "e2el": [o["latency"] for o in done],
    }
    ticks: dict[int, int] = {}
    origin = min((o["start_time"] for o in done), default=0.0)
    for o in done:
        stamp = o["start_time"] + o["ttft"]
        for gap in [0.0, *o["itl"]]:
            stamp += gap
            ticks[int(stamp - origin)] = ticks.get(int(stamp - origin), 0) + 1
    spans = [(o["start_time"], o["start_time"] + o["latency"]) for o in done]
    result: dict[str, Any] = {
        "duration": duration, "completed": len(done), "failed": len(outputs) - len(done),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / duration, "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "latencies": [o["latency"] for o in outputs],
        "queue_times": [0.0 for _ in outputs],
        "max_output_tokens_per_s": float(max(ticks.values(), default=0)),
        "max_concurrent_requests": max((sum(1 for a, b in spans if a <= s < b) for s, _ in spans),
                                       default=0),
        "rtfx": 0.0,
    }
    for name in ("ttft", "tpot", "itl", "e2el"):
        if name not in selected:
            continue
        values = series[name] or [0.0]
        result[f"mean_{name}_ms"] = statistics.fmean(values) * 1000
        result[f"median_{name}_ms"] = statistics.median(values) * 1000
        result[f"std_{name}_ms"] = statistics.pstdev(values) * 1000
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            result[f"p{word}_{name}_ms"] = percentile(series[name], p) * 1000
    return result


def print_block(result: dict[str, Any], args: argparse.Namespace, spec: dict[str, Any] | None,
                 ) -> None:
    row = "{:<40} {:<10}".format
    num = "{:<40} {:<10.2f}".format
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             row("Successful requests:", result["completed"]),
             row("Failed requests:", result["failed"])]
    if args.max_concurrency is not None:
        lines.append(row("Maximum request concurrency:", args.max_concurrency))
    lines += [num("Benchmark duration (s):", result["duration"]),
              row("Total input tokens:", result["total_input_tokens"]),
              row("Total generated tokens:", result["total_output_tokens"]),
              num("Request throughput (req/s):", result["request_throughput"]),
              num("Output token throughput (tok/s):", result["output_throughput"]),
              num("Peak output token throughput (tok/s):", result["max_output_tokens_per_s"]),
              num("Peak concurrent requests:", result["max_concurrent_requests"]),
              num("Total token throughput (tok/s):", result["total_token_throughput"])]
    for name, title, header in (("ttft", "TTFT", "Time to First Token"),
                                ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
                                ("itl", "ITL", "Inter-token Latency"),
                                ("e2el", "E2EL", "End-to-end Latency")):
        if f"mean_{name}_ms" in result:
            lines += ["{s:{c}^{n}}".format(s=header, n=50, c="-"),
                      num(f"Mean {title} (ms):", result[f"mean_{name}_ms"]),
                      num(f"Median {title} (ms):", result[f"median_{name}_ms"])]
            lines += [num(f"P{k[1:].split('_')[0]} {title} (ms):", v) for k, v in result.items()
                      if k.startswith("p") and k.endswith(f"_{name}_ms") and k[1].isdigit()]
    if spec is not None:
        lines += ["{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-"),
                  num("Acceptance rate (%):", spec["acceptance_rate"]),
                  num("Acceptance length:", spec["acceptance_length"]),
                  row("Drafts:", spec["num_drafts"]), row("Draft tokens:", spec["draft_tokens"]),
                  row("Accepted tokens:", spec["accepted_tokens"])]
    print("\n".join([*lines, "=" * 50]), flush=True)


def spec_stats(before: dict[str, float] | None, after: dict[str, float] | None,
               ) -> dict[str, Any] | None:
    """serve.py:1133-1171: the counters' deltas over the main run."""
    if before is None or after is None:
        return None
    drafts = int(after.get("num_drafts", 0) - before.get("num_drafts", 0))
    tokens = int(after.get("num_draft_tokens", 0) - before.get("num_draft_tokens", 0))
    accepted = int(after.get("num_accepted_tokens", 0) - before.get("num_accepted_tokens", 0))
    if tokens <= 0:
        return None
    positions = sorted(int(k[3:]) for k in {*before, *after} if k.startswith("pos"))
    per_position = [(after.get(f"pos{p}", 0) - before.get(f"pos{p}", 0)) / drafts
                    for p in positions] if drafts > 0 else []
    return {"num_drafts": drafts, "draft_tokens": tokens, "accepted_tokens": accepted,
            "per_position": per_position,
            "acceptance_rate": accepted / tokens * 100,
            "acceptance_length": 1 + accepted / drafts if drafts > 0 else 0.0}
