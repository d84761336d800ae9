"""Stand-in `vllm bench serve`: real requests to the server, vLLM 0.33.0's metrics and JSON.

As vllm/benchmarks/serve.py: with --model it asks nothing else of the server (without it, the
first of /v1/models); its prompts from `_datasets` (`random` from --seed, Spec-Bench's file with
`spec_bench`); the initial test request when --ready-check-timeout-sec > 0;
/metrics read before and after the run for the spec-decode counters; then every prompt through
POST /v1/completions (streamed, `stream_options.include_usage`, as the `vllm` and `openai`
backends send it) at most --max-concurrency at a time, arriving at --request-rate a second
(burstiness 1: Poisson arrivals from --seed, as get_request draws them; inf: all at once);
TTFT, TPOT and ITL from the stream's own timing; the result block; and with --save-result the
JSON of serve.py:2300-2456 (without --save-detailed the per-request lists it deletes are gone)
in --result-dir/--result-filename. Each request carries the sampling bench serve sends
(serve.py:2227-2261): the sampling flags given, --extra-body's keys over them, and without
--temperature no temperature at all, with the release's WARNING; a release before 0.15.0
(STANDIN_VERSION) sends temperature 0.0 when none was given (0.14.0 serve.py:1636).
STANDIN_MODE: slow-bench (hangs after the test run), bench-fails (traceback, exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import datetime

import standin_http
from vllm import __version__
from vllm._datasets import DatasetProblem, sample
from vllm._log import note
from vllm._metrics import metrics, print_block, spec_stats

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

_DETAILED = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts",
             "errors", "server_queue_times", "server_ttfts")


def get_text(url: str) -> str | None:
    try:
        response = standin_http.open_url(url, timeout=600)
        if response.status != 200:
            response.close()
            return None
        return response.read().decode()
    except OSError:
        return None


def spec_counters(base_url: str) -> dict[str, float] | None:
    """fetch_spec_decode_metrics (serve.py:210): the `vllm:spec_decode*_total` samples."""
    text = get_text(base_url + "/metrics")
    if text is None:
        return None
    found: dict[str, float] = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line.startswith("vllm:spec_decode"):
            continue
        parts = line.split(None, 1)
        name = parts[0].split("{")[0]
        if not name.endswith("_total"):
            continue
        key = ("num_drafts" if "num_drafts" in name else "num_draft_tokens"
               if "num_draft_tokens" in name else "num_accepted_tokens")
        if "per_pos" in name and 'position="' in line:
            key = "pos" + line.split('position="', 1)[1].split('"', 1)[0]
        found[key] = found.get(key, 0.0) + float(parts[-1])
    return found or None


_SAMPLING = ("top_p", "top_k", "min_p", "temperature", "frequency_penalty", "presence_penalty",
             "repetition_penalty")


def extra_body(args: argparse.Namespace) -> dict[str, Any]:
    """main_async's `extra_body` (serve.py:2227-2261): the sampling parameters given, with
    --extra-body's keys over them."""
    sampling = {k: v for k in _SAMPLING if (v := getattr(args, k, None)) is not None}
    if "temperature" not in sampling:
        if _version_tuple(__version__) < (0, 15, 0):
            sampling["temperature"] = 0.0  # Default to greedy decoding. (0.14.0 :1636)
        else:
            print("WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests "
                  "by default. The default will be determined on the server side and can be "
                  "model/API specific. For the old behavior, include --temperature=0.")
    return {**sampling, **(args.extra_body or {})}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def request(api_url: str, model: str, prompt: str, prompt_len: int, output_len: int,
            ignore_eos: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """async_request_openai_completions (endpoint_request_func.py:207), with a thread."""
    out: dict[str, Any] = {"success": False, "prompt_len": prompt_len, "ttft": 0.0, "itl": [],
                           "latency": 0.0, "output_tokens": 0, "error": "", "text": ""}
    body = {"model": model, "prompt": prompt, "repetition_penalty": 1.0,
            "max_tokens": output_len, "logprobs": None, "stream": True,
            "stream_options": {"include_usage": True}}
    if ignore_eos:  # _update_payload_common (:149): ignore_eos, then the extra body
        body["ignore_eos"] = True
    body.update(extra or {})
    start = last = time.perf_counter()
    out["start_time"] = start
    try:
        response = standin_http.open_url(api_url, body, timeout=600)
        if response.status != 200:
            out["error"] = response.reason or ""
            response.close()
            return out
        for raw in response.lines():
            message = raw.decode().strip()
            if not message or message.startswith(":"):
                continue
            chunk = message.removeprefix("data: ")
            if chunk == "[DONE]":
                continue
            data = json.loads(chunk)
            if data.get("choices"):
                now = time.perf_counter()
                if not out["ttft"]:
                    out["ttft"] = now - start
                else:
                    out["itl"].append(now - last)
                last = now
                out["text"] += data["choices"][0].get("text") or ""
            elif data.get("usage"):
                out["output_tokens"] = data["usage"].get("completion_tokens")
                out["prompt_len"] = data["usage"].get("prompt_tokens", prompt_len)
        out["success"] = bool(out["ttft"])
        out["latency"] = last - start
        if not out["success"]:
            out["error"] = ("Never received a valid chunk to calculate TTFT.This response will "
                            "be marked as failed!")
    except OSError as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def arrival_times(args: argparse.Namespace, count: int) -> list[float]:
    """When each request is sent, from the start: gamma gaps of mean 1 / --request-rate and
    shape --burstiness (1: exponential), from --seed; all at 0 with an infinite rate."""
    rate = float(args.request_rate)
    rng = random.Random(args.seed)
    found, at = [], 0.0
    for _ in range(count):
        found.append(at)
        if 0 < rate < float("inf"):
            shape = float(args.burstiness or 1.0)
            at += rng.gammavariate(shape, 1.0 / (rate * shape))
    return found


def bench_serve(args: argparse.Namespace) -> int:
    mode = os.environ.get("STANDIN_MODE") or "ok"
    note("bench")
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    api_url = base_url + args.endpoint
    if mode == "bench-fails":
        print("Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-"
              "packages/vllm/benchmarks/serve.py\", line 916, in benchmark\n    raise ValueError("
              "\nValueError: Initial test run failed - Please make sure benchmark arguments are "
              "correctly specified. Error: Server disconnected", flush=True)
        return 1
    if args.model is None:
        print("Model not specified, fetching first model from server...")
        models = json.loads(get_text(base_url + "/v1/models") or '{"data": [{"id": ""}]}')
        args.model = models["data"][0]["id"]
        print(f"First model name: {args.model}, first model id: {args.model}")
    try:
        rows = sample(args)
    except DatasetProblem as exc:
        print(f"Traceback (most recent call last):\n{exc}", flush=True)
        return 1
    model = args.served_model_name or args.model
    extra = extra_body(args)
    if args.ready_check_timeout_sec > 0:
        print("Starting initial single prompt test run...")
        test = request(api_url, model, *rows[0], args.ignore_eos, extra)
        if not test["success"]:
            print("ValueError: Initial test run failed - Please make sure benchmark arguments are "
                  f"correctly specified. Error: {test['error']}", flush=True)
            return 1
        print("Initial test run completed.")
    else:
        print("Skipping endpoint ready check.")
    if mode == "slow-bench":
        print("Starting main benchmark run...", flush=True)
        while True:
            time.sleep(3600)
    before = spec_counters(base_url)
    print("Starting main benchmark run...")
    print(f"Traffic request rate: {args.request_rate}")
    print(f"Burstiness factor: {args.burstiness} (Poisson process)")
    print(f"Maximum request concurrency: {args.max_concurrency}", flush=True)
    arrivals = arrival_times(args, len(rows))
    started = time.perf_counter()

    def one(index: int) -> dict[str, Any]:
        time.sleep(max(0.0, started + arrivals[index] - time.perf_counter()))
        return request(api_url, model, *rows[index], args.ignore_eos, extra)

    outputs = standin_http.run_all(one, len(rows), args.max_concurrency or len(rows) or 1)
    duration = max(time.perf_counter() - started, 1e-9)
    spec = spec_stats(before, spec_counters(base_url))
    failed = [o for o in outputs if not o["success"]]
    if failed:
        print("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate(failed[:10]):
            print(f"Error {i}: {o['error']}")
    selected = (args.percentile_metrics or "ttft,tpot,itl").split(",")
    result = metrics(outputs, duration, [float(p) for p in args.metric_percentiles.split(",")],
                     selected)
    if spec is not None:
        result.update({f"spec_decode_{k}": v for k, v in spec.items()
                       if k in ("acceptance_rate", "acceptance_length")})
        result.update(spec_decode_num_drafts=spec["num_drafts"],
                      spec_decode_draft_tokens=spec["draft_tokens"],
                      spec_decode_accepted_tokens=spec["accepted_tokens"],
                      spec_decode_per_position_acceptance_rates=spec["per_position"])
    print_block(result, args, spec)
    return save(args, result)


def save(args: argparse.Namespace, result: dict[str, Any]) -> int:
    """main_async's result_json (serve.py:2300-2456), written as the release writes it."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    head: dict[str, Any] = {
        "date": stamp, "endpoint_type": args.backend, "backend": args.backend,
        "label": args.label, "model_id": args.model, "tokenizer_id": args.tokenizer or args.model,
        "num_prompts": args.num_prompts}
    for item in args.metadata or []:
        key, _, value = item.partition("=")
        head[key.strip()] = value.strip()
    head.update(request_rate=args.request_rate if args.request_rate < float("inf") else "inf",
                burstiness=args.burstiness, max_concurrency=args.max_concurrency)
    data = {**head, **result}
    if not args.save_detailed:
        for key in _DETAILED:
            data.pop(key, None)
    if not (args.save_result or args.append_result):
        return 0
    concurrency = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
    name = args.result_filename or (f"{args.label or args.backend}-{args.request_rate}qps"
                                    f"{concurrency}-{args.model.split('/')[-1]}-{stamp}.json")
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        name = os.path.join(args.result_dir, name)
    with open(name, "a+" if args.append_result else "w", encoding="utf-8") as handle:
        if args.append_result and handle.tell() != 0:
            handle.write("\n")
        json.dump(data, handle)
    return 0


if __name__ == "__main__":  # pragma: no cover - run through vllm.entrypoints.cli.main
    sys.exit(1)
