"""Stand-in `python -m sglang.bench_serving`: the real flag names, one JSON line per run.

It talks to the server (/get_model_info, a few /generate, /get_server_info for the accept
length, as the real one does) and appends bench_serving's result keys to --output-file.
STANDIN_MODE: slow-bench (hangs), bench-fails (traceback, exit 1), bench-empty (exit 0, no
line); anything else measures. STANDIN_THROUGHPUT sets output_throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from typing import Any

from sglang.launch_server import note

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    parser.add_argument("--backend", type=str, default="sglang",
                        choices=["sglang", "sglang-native", "sglang-oai", "vllm", "lmdeploy"])
    parser.add_argument("--base-url", type=str, default=None)
    parser.add_argument("--host", type=str, default="0.0.0.0")
    parser.add_argument("--port", type=int)
    parser.add_argument("--dataset-name", type=str, default="sharegpt",
                        choices=["sharegpt", "random", "random-ids", "generated-shared-prefix",
                                 "mmmu", "random-image", "mooncake"])
    parser.add_argument("--dataset-path", type=str, default="")
    parser.add_argument("--model", type=str)
    parser.add_argument("--tokenizer", type=str)
    parser.add_argument("--num-prompts", type=int, default=1000)
    parser.add_argument("--sharegpt-output-len", type=int, default=None)
    parser.add_argument("--random-input-len", type=int, default=1024)
    parser.add_argument("--random-output-len", type=int, default=1024)
    parser.add_argument("--random-range-ratio", type=float, default=0.0)
    parser.add_argument("--request-rate", type=float, default=float("inf"))
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--output-file", type=str, help="Output JSONL file name.")
    parser.add_argument("--output-details", action="store_true")
    parser.add_argument("--disable-tqdm", action="store_true")
    parser.add_argument("--disable-stream", action="store_true")
    parser.add_argument("--seed", type=int, default=1, help="The random seed.")
    parser.add_argument("--warmup-requests", type=int, default=1)
    parser.add_argument("--flush-cache", action="store_true")
    parser.add_argument("--apply-chat-template", action="store_true")
    parser.add_argument("--extra-request-body", type=str)
    return parser


def _call(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with _OPENER.open(request, timeout=30) as response:
        result: dict[str, Any] = json.loads(response.read() or b"{}")
        return result


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    mode = os.environ.get("STANDIN_MODE") or "ok"
    note("bench")
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    print(f"Namespace({', '.join(f'{k}={v!r}' for k, v in sorted(vars(args).items()))})",
          flush=True)
    if mode == "slow-bench":
        print("Starting warmup with 1 sequences...", flush=True)
        while True:
            time.sleep(3600)
    if mode == "bench-fails":
        print("Traceback (most recent call last):\n"
              '  File "/sgl/python/sglang/bench_serving.py", line 1672, in benchmark\n'
              "    raise ValueError(\n"
              "ValueError: Initial test run failed - Please make sure benchmark arguments are "
              "correctly specified. Error: Server disconnected", flush=True)
        return 1
    info = _call(base_url + "/get_model_info")
    out_len = max(1, min(args.random_output_len, 16))
    started = time.perf_counter()
    for _ in range(max(1, min(args.num_prompts, 3))):
        _call(base_url + "/generate",
              {"text": "Hello", "sampling_params": {"max_new_tokens": out_len,
                                                    "ignore_eos": True}})
    duration = time.perf_counter() - started
    internal = _call(base_url + "/get_server_info").get("internal_states") or [{}]
    accept_length = internal[0].get("avg_spec_accept_length")
    output = float(os.environ.get("STANDIN_THROUGHPUT") or 82.0)
    total = output * (args.random_input_len + args.random_output_len) / args.random_output_len
    itl = 1000.0 / output
    ttft = float(os.environ.get("STANDIN_TTFT_MS") or 120.0)
    result = {
        "backend": args.backend, "dataset_name": args.dataset_name,
        "request_rate": args.request_rate, "max_concurrency": args.max_concurrency,
        "random_input_len": args.random_input_len, "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio, "duration": duration,
        "completed": args.num_prompts,
        "total_input_tokens": args.num_prompts * args.random_input_len,
        "total_output_tokens": args.num_prompts * args.random_output_len,
        "request_throughput": output / args.random_output_len,
        "input_throughput": total - output, "output_throughput": output,
        "total_throughput": total,
        "mean_ttft_ms": ttft, "median_ttft_ms": ttft, "p99_ttft_ms": ttft * 1.2,
        "mean_itl_ms": itl, "median_itl_ms": statistics.median([itl]), "p99_itl_ms": itl * 1.3,
        "concurrency": float(args.max_concurrency or 1), "accept_length": accept_length,
    }
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Backend:", args.backend))
    print("{:<40} {:<10}".format("Model:", info.get("model_path", "")))
    print("{:<40} {:<10}".format("Successful requests:", args.num_prompts))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", output))
    print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", total))
    if accept_length:
        print("{:<40} {:<10.2f}".format("Accept length:", accept_length))
    print("{:<40} {:<10.2f}".format("Median TTFT (ms):", ttft))
    print("{:<40} {:<10.2f}".format("Median ITL (ms):", itl))
    print("=" * 50, flush=True)
    if mode == "bench-empty":
        print(f"Error running benchmark for request rate: {args.request_rate}", flush=True)
        return 0
    if args.output_file:
        with open(args.output_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
