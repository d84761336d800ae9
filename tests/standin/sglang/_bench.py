"""The stand-in's benchmark: the release's flags and steps, one JSON line per run.

`python -m sglang.bench_serving` runs it in every release, `python -m sglang.benchmark.serving`
from 0.5.15, where the benchmark moved (bench_serving.py and benchmark/serving.py here: which
release has which module, and the old one's FutureWarning).

As the real one (0.5.2 bench_serving.py, 0.5.23 benchmark/serving.py): from 0.5.10 it waits for
/v1/models; it asks /v1/models for the model; it builds the prompts from --seed (`_datasets`:
`random` and `sharegpt` without a local --dataset-path download ShareGPT, which fails here, a GPU
host has no internet, nor has the stand-in; `random-ids` needs nothing; `sharegpt` reads a local
ShareGPT file as the release does, each request --sharegpt-output-len tokens long). Then a
warm-up, /flush_cache with --flush-cache, every prompt, the accept length from /get_server_info
(/server_info from 0.5.10), the result block and the JSON line. A failed request only lowers
`completed`; the line is still written. STANDIN_MODE: slow-bench (hangs), bench-fails
(traceback, exit 1), bench-empty (exit 0, no line).
The prompts go out as the release sends them: at most --max-concurrency at a time (a semaphore),
at --request-rate a second (Poisson arrivals from --seed; inf: all at once). The figures come
from the load model (`_load`) at the concurrency the run reaches: --max-concurrency, at most the
prompts sent, and with a finite --request-rate Little's law (rate x one request's latency); with
neither the stand-in has always reported one request's figures. A speculative server (one whose
/get_server_info has an accept length) follows the model's speculative curve, with the gain its
prompts' task category gets (`standin_traffic`). Every latency key
of the release's result line is written (mean, median, std, p99; p95 for ITL).
Each request carries the sampling the release's client sends (async_request_sglang_generate:
`temperature` 0.0 in its sampling_params up to 0.5.13 (0.5.9 bench_serving.py:601), --temperature
(default 0.0) and --top-p when below 1.0 from 0.5.14 (0.5.19 benchmark/serving.py:665-671);
--extra-request-body's JSON is merged into the request at its top level (:680), so a
`sampling_params` there replaces the client's whole one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import standin_host
import standin_http
import standin_load as _load
import standin_traffic
from sglang import __version__
from sglang._datasets import DatasetProblem, Row, sample
from sglang._flags import build_bench_parser, flag_set, version_tuple
from sglang._log import note

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

AT = version_tuple(__version__)
SHAREGPT_URL = (
    "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/"
    "ShareGPT_V3_unfiltered_cleaned_split.json"
)


def build_parser() -> argparse.ArgumentParser:
    parser = build_bench_parser(__version__)
    defaults = {
        row.get("d") or row["o"][0].lstrip("-").replace("-", "_"): row["df"]
        for row in flag_set(__version__)["bench_serving"] if "df" in row
    }
    parser.set_defaults(request_rate=float("inf"), **defaults)
    return parser


def _call(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = standin_http.call(url, body) or b"{}"
    try:
        result: dict[str, Any] = json.loads(raw)
    except ValueError:
        result = {"text": raw.decode(errors="replace")}
    return result


def _offline_download() -> int:
    """What the release prints when it must fetch ShareGPT and the host has no internet."""
    print("Traceback (most recent call last):")
    if AT < (0, 5, 7):  # bench_serving.py download_and_cache_file(SHAREGPT_URL): requests.get
        print(f"Downloading from {SHAREGPT_URL} to /tmp/ShareGPT_V3_unfiltered_cleaned_split.json")
        print('  File "/sgl/python/sglang/bench_serving.py", line 1163, in sample_random_requests')
        print("    dataset_path = download_and_cache_file(SHAREGPT_URL)")
        print("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
              "port=443): Max retries exceeded with url: /datasets/anon8231489123/"
              "ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json "
              "(Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection object at "
              "0x7f3a2c1e5d50>: Failed to resolve 'huggingface.co' ([Errno -3] Temporary "
              "failure in name resolution)\"))")
    else:  # download_and_cache_hf_file -> huggingface_hub.hf_hub_download
        print('  File "/sgl/python/sglang/benchmark/utils.py", line 92, in '
              "download_and_cache_hf_file")
        print("    return hf_hub_download(repo_id=repo_id, filename=filename, "
              "repo_type=repo_type)")
        print("huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying "
              "to locate the file on the Hub and we cannot find the requested files in the local "
              "cache. Please check your connection and try again or make sure your Internet "
              "connection is on.")
    sys.stdout.flush()
    return 1


def request_body(args: argparse.Namespace, prompt: str, tokens: int) -> dict[str, Any]:
    """The /generate request the release's sglang backend sends (see the module)."""
    sampling: dict[str, Any] = {"temperature": getattr(args, "temperature", 0.0),
                                "max_new_tokens": tokens, "ignore_eos": True}
    if getattr(args, "top_p", 1.0) < 1.0:
        sampling["top_p"] = args.top_p
    extra = json.loads(args.extra_request_body) if args.extra_request_body else {}
    return {"text": prompt, "sampling_params": sampling, **extra}


def _generate(base_url: str, body: dict[str, Any]) -> bool:
    try:
        _call(base_url + "/generate", body)
        return True
    except (OSError, ValueError):
        return False


def _send_all(args: argparse.Namespace, base_url: str, requests: list[Row]) -> int:
    """Every prompt, at most --max-concurrency at a time, at --request-rate: how many completed."""
    rng = random.Random(args.seed)
    rate = float(args.request_rate)
    arrivals, at = [], 0.0
    for _ in requests:
        arrivals.append(at)
        at += rng.expovariate(rate) if math.isfinite(rate) and rate > 0 else 0.0
    started = time.perf_counter()

    def one(index: int) -> bool:
        time.sleep(max(0.0, started + arrivals[index] - time.perf_counter()))
        return _generate(base_url, request_body(args, *requests[index]))

    workers = args.max_concurrency or len(requests) or 1
    return sum(standin_http.run_all(one, len(requests), workers))


def concurrency(args: argparse.Namespace, sent: int, one_request_s: float) -> float:
    """The requests running at once that the run reaches (see the module)."""
    rate = float(args.request_rate)
    if not args.max_concurrency and not math.isfinite(rate):
        return 1.0
    c = float(min(args.max_concurrency or sent, max(sent, 1)))
    if math.isfinite(rate) and rate > 0:
        c = min(c, max(1.0, rate * one_request_s))
    return c


def latencies(name: str, mean: float, *, p95: bool = False, p99: float = 1.2) -> dict[str, float]:
    found = {f"mean_{name}_ms": mean, f"median_{name}_ms": mean, f"std_{name}_ms": mean * 0.1}
    if p95:
        found[f"p95_{name}_ms"] = mean * 1.15
    found[f"p99_{name}_ms"] = mean * p99
    return found


def _wait_ready(url: str, timeout_s: int) -> bool:
    print(f"Waiting up to {timeout_s}s for {url} to become ready...", flush=True)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        try:
            _call(url)
            print(f"Server ready in {time.perf_counter() - started:.1f}s.", flush=True)
            return True
        except (OSError, ValueError):
            time.sleep(0.2)
    print(f"Server did not become ready within {timeout_s} timeout.", flush=True)
    return False


def main(argv: list[str], *, module: str) -> int:
    """The benchmark, run as `python -m MODULE ARGV`."""
    args = build_parser().parse_args(argv)
    mode = os.environ.get("STANDIN_MODE") or "ok"
    note("bench", module=module)
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    print(f"benchmark_args=Namespace({shown})", flush=True)
    if mode == "slow-bench":
        print("Starting warmup with 1 sequences...", flush=True)
        while True:
            time.sleep(3600)
    if mode == "bench-fails":
        print("Traceback (most recent call last):\n"
              '  File "/sgl/python/sglang/bench_serving.py", line 1672, in benchmark\n'
              "    raise ValueError(\n"
              "ValueError: Warmup failed - Please make sure benchmark arguments are correctly "
              "specified. Error: Server disconnected", flush=True)
        return 1
    ready_s = getattr(args, "ready_check_timeout_sec", 0) or 0
    if AT >= (0, 5, 10) and ready_s > 0 and not _wait_ready(base_url + "/v1/models", ready_s):
        print(f"Server at {base_url}/v1/models is not ready. Exiting.", flush=True)
        return 1
    model = args.model or _call(base_url + "/v1/models")["data"][0]["id"]
    try:
        requests = sample(args)
    except DatasetProblem as exc:
        print(f"Traceback (most recent call last):\n{exc}", flush=True)
        return 1
    if requests is None:
        return _offline_download()
    if not requests:  # every row too short: the warm-up's input_requests[0]
        print("Traceback (most recent call last):\nIndexError: list index out of range",
              flush=True)
        return 1
    random_out = round(sum(out for _, out in requests) / max(len(requests), 1)) \
        if args.dataset_name == "sharegpt" else args.random_output_len
    print(f"Starting warmup with {args.warmup_requests} sequences...", flush=True)
    if args.warmup_requests and not any(
        _generate(base_url, request_body(args, requests[0][0], min(random_out, 32)))
        for _ in range(args.warmup_requests)
    ):
        print("ValueError: Warmup failed - Please make sure benchmark arguments are correctly "
              "specified. Error: Server disconnected", flush=True)
        return 1
    print(f"Warmup completed with {args.warmup_requests} sequences. Starting main benchmark "
          "run...", flush=True)
    if args.flush_cache:
        _call(base_url + "/flush_cache", {})
    started = time.perf_counter()
    completed = _send_all(args, base_url, requests)
    duration = max(time.perf_counter() - started, 1e-6)
    info_path = "/server_info" if AT >= (0, 5, 10) else "/get_server_info"
    internal = _call(base_url + info_path).get("internal_states") or [{}]
    accept_length = internal[0].get("avg_spec_accept_length")
    sent = len(requests)
    if completed == 0:
        print("UserWarning: All requests failed. This is likely due to a misconfiguration on the "
              "benchmark arguments.", flush=True)
    one = standin_host.throughput(__version__) * standin_host.host_speed()
    ttft_one = float(os.environ.get("STANDIN_TTFT_MS") or 120.0)
    c = concurrency(args, sent, ttft_one / 1000.0 + random_out / one)
    gain = standin_traffic.spec_gain([p for p, _ in requests],
                                     float(os.environ.get("STANDIN_SPEC_GAIN") or 0.0))
    per_request = one * _load.speed(c, speculative=accept_length is not None, gain=gain)
    output = per_request * c * completed / max(sent, 1)
    in_len = args.random_input_len if args.dataset_name != "sharegpt" else round(
        sum(len(p.split()) for p, _ in requests) / max(len(requests), 1))
    total = output * (in_len + random_out) / random_out
    itl = 1000.0 * c / output if output else math.nan
    ttft = ttft_one * _load.ttft_factor(c)
    result = {
        "backend": args.backend, "dataset_name": args.dataset_name,
        "request_rate": args.request_rate if math.isfinite(args.request_rate) else "inf",
        "max_concurrency": args.max_concurrency, "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len, "random_range_ratio": args.random_range_ratio,
        "duration": duration, "completed": completed,
        "total_input_tokens": completed * in_len, "total_output_tokens": completed * random_out,
        "request_throughput": completed / duration, "input_throughput": total - output,
        "output_throughput": output, "total_throughput": total,
        **latencies("e2e_latency", ttft + max(0, random_out - 1) * itl),
        **latencies("ttft", ttft), **latencies("tpot", itl, p99=1.3),
        **latencies("itl", itl, p95=True, p99=1.3),
        "concurrency": c, "accept_length": accept_length,
    }
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Backend:", args.backend))
    print("{:<40} {:<10}".format("Model:", model))
    print("{:<40} {:<10}".format("Successful requests:", completed))
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

