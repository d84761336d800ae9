"""The stand-in server's HTTP side: the routes `vllm bench serve` and specbench call.

As vLLM 0.33.0's OpenAI server: GET /health (200, empty), GET /v1/models, POST /v1/completions
(streamed as server-sent events with a final usage chunk, as bench serve's `vllm` backend asks,
or one JSON body), GET /metrics in Prometheus text with vLLM's names. With a speculative config
the engine counts `vllm:spec_decode_num_drafts`, `..._num_draft_tokens`,
`..._num_accepted_tokens` and `..._num_accepted_tokens_per_pos` (vllm/v1/spec_decode/
metrics.py:227-258; exposed with `_total`), so that 1 + accepted / drafts is the accept length;
each request's own is STANDIN_ACCEPT_LENGTH (default 2.6), or its task category's
(`standin_traffic`), within +-15 %, from its prompt; a speculative server decodes at its
category's gain.
Tokens stream at STANDIN_THROUGHPUT (default 82) tokens/s per request, the first after
STANDIN_TTFT_MS (default: one token's time), each due at its own time from the first (as a GPU's
steps are: a stand-in thread that wakes late on a busy host sends that token late, and the next
one on time), so that bench serve's output_throughput is about
STANDIN_THROUGHPUT times the concurrency at one request; with more requests in flight each
token and the first one take longer, and a speculative server's advantage fades, as `_load`
models it (STANDIN_FATAL_AT_RUNNING: the engine's fatal error with that many in flight; a
streamed first token waits as `_load.first_token` says).
The scheduler's gauges follow the requests in flight: each holds ceil(tokens / 16) KV blocks of
STANDIN_KV_TOKENS (default 512,000, as the startup log says) while it runs; in arrival order,
those that fit in --max-num-seqs (default 1024, 0.33.0's on an H100/H200) and in the KV cache
count as running, the rest as waiting; vllm:kv_cache_usage_perc is the used blocks' share
(vllm/v1/core/block_pool.py get_usage).
Each distinct sampling the completion requests carry (their sampling parameters) is noted once
as "sampling" in $STANDIN_INFO_FILE: what tests compare a record's `sampling` with.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable

import standin_host
import standin_load as _load
import standin_traffic
from standin_httpd import RequestHandler
from vllm import __version__
from vllm._log import note as _note

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

SAMPLING = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
            "repetition_penalty")

_SEEN: set[str] = set()
_SEEN_LOCK = threading.Lock()


def _noted_sampling(sampling: dict[str, Any]) -> None:
    """Each distinct sampling the requests carry, noted once (see the module)."""
    key = json.dumps(sampling, sort_keys=True)
    with _SEEN_LOCK:
        if key in _SEEN:
            return
        _SEEN.add(key)
    _note("sampling", sampling=sampling)


class State:
    """What the server knows: readiness, the served name, the engine's counters."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = False
        self.model = ""
        self.served = ""
        self.max_model_len = 4096
        self.spec_tokens = 0  # num_speculative_tokens; 0: no speculative decoding
        self.on_fatal: Callable[[], None] = lambda: None
        self.counters: dict[str, float] = {"prompt": 0, "generation": 0, "success": 0,
                                           "drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.per_pos: list[int] = []
        self.ideal_accepted = 0.0
        self.started = time.time()
        self.calls = 0
        self.max_num_seqs = 1024
        self.held: dict[str, int] = {}  # tokens each request in flight holds, in arrival order

    def hold(self, request: str, tokens: int) -> None:
        with self.lock:
            self.held[request] = tokens

    def release(self, request: str) -> None:
        with self.lock:
            self.held.pop(request, None)

    def running_now(self) -> int:
        """The requests in flight; with STANDIN_FATAL_AT_RUNNING of them the engine dies."""
        with self.lock:
            running = len(self.held)
        if _load.dies_at(running):
            self.on_fatal()
        return running

    def load(self) -> tuple[int, int, float]:
        """(running, waiting, KV-cache usage 0..1) of the requests in flight; under the lock."""
        total = max(1, kv_tokens() // KV_BLOCK)
        used = running = 0
        for tokens in self.held.values():
            need = -(-tokens // KV_BLOCK)
            if running < self.max_num_seqs and used + need <= total:
                running, used = running + 1, used + need
        return running, len(self.held) - running, used / total

    def generate(self, prompt: str, prompt_tokens: int, new_tokens: int) -> None:
        """Count one finished request, as the engine's stat loggers do."""
        with self.lock:
            self.counters["prompt"] += prompt_tokens
            self.counters["generation"] += new_tokens
            self.counters["success"] += 1
            if not self.spec_tokens or new_tokens < 2:
                return
            digest = hashlib.sha256(prompt.encode()).digest()
            own = max(1.0, standin_traffic.accept_length(prompt, base_accept_length())
                      * (0.85 + 0.3 * digest[0] / 255.0))
            own = min(own, self.spec_tokens + 1.0)
            # accepted tokens by error diffusion over the server's life: the counters are whole
            # numbers, and 1 + accepted / drafts tracks the configured accept length even when
            # each request has only a few tokens
            before = round(self.ideal_accepted)
            self.ideal_accepted += new_tokens * (1.0 - 1.0 / own)
            accepted = max(0, min(round(self.ideal_accepted) - before, new_tokens - 1))
            drafts = new_tokens - accepted
            accepted = min(accepted, drafts * self.spec_tokens)
            self.counters["drafts"] += drafts
            self.counters["draft_tokens"] += drafts * self.spec_tokens
            self.counters["accepted"] += accepted
            left = accepted
            for pos in range(self.spec_tokens):  # earlier positions accept more often
                here = min(drafts, left)
                self.per_pos[pos] += here
                left -= here

    def metrics(self) -> str:
        """/metrics: prometheus_client's text format, labels model_name and engine."""
        labels = f'model_name="{self.served}",engine="0"'
        out: list[str] = []

        def family(name: str, kind: str, doc: str, samples: list[tuple[str, float]]) -> None:
            out.append(f"# HELP {name} {doc}")
            out.append(f"# TYPE {name} {kind}")
            for suffix_labels, value in samples:
                out.append(f"{name}{suffix_labels} {float(value)}")

        with self.lock:
            c = dict(self.counters)
            per_pos = list(self.per_pos)
            running, waiting, usage = self.load()
        family("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.", [("{" + labels + "}", running)])
        family("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", [("{" + labels + "}", waiting)])
        family("vllm:kv_cache_usage_perc", "gauge",
               "KV-cache usage. 1 means 100 percent usage.", [("{" + labels + "}", usage)])
        for name, key, doc in (
            ("vllm:prompt_tokens", "prompt", "Number of prefill tokens processed."),
            ("vllm:generation_tokens", "generation", "Number of generation tokens processed."),
        ):
            family(name, "counter", doc, [("_total{" + labels + "}", c[key]),
                                          ("_created{" + labels + "}", self.started)])
        family("vllm:request_success", "counter", "Count of successfully processed requests.",
               [("_total{" + labels + ',finished_reason="length"}', c["success"])])
        if self.spec_tokens:
            for name, key, doc in (
                ("vllm:spec_decode_num_drafts", "drafts", "Number of spec decoding drafts."),
                ("vllm:spec_decode_num_draft_tokens", "draft_tokens", "Number of draft tokens."),
                ("vllm:spec_decode_num_accepted_tokens", "accepted",
                 "Number of accepted tokens."),
            ):
                family(name, "counter", doc, [("_total{" + labels + "}", c[key]),
                                              ("_created{" + labels + "}", self.started)])
            family("vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
                   "Accepted tokens per draft position.",
                   [("_total{" + labels + f',position="{p}"' + "}", n)
                    for p, n in enumerate(per_pos)])
        return "\n".join(out) + "\n"


STATE = State()
KV_BLOCK = 16  # tokens per KV block (--block-size's default)


def kv_tokens() -> int:
    return int(os.environ.get("STANDIN_KV_TOKENS") or 512_000)


def base_accept_length() -> float:
    return float(os.environ.get("STANDIN_ACCEPT_LENGTH") or 2.6)


def throughput() -> float:
    return standin_host.throughput(__version__)


def token_s(running: int, prompt: str = "") -> float:
    """One output token's time with `running` requests in flight (`_load`'s model), at the
    speculative gain of the prompt's task category (`standin_traffic`)."""
    gain = standin_traffic.spec_gain([prompt], float(os.environ.get("STANDIN_SPEC_GAIN") or 0.0))
    return 1.0 / (throughput() * _load.speed(running, speculative=STATE.spec_tokens > 0,
                                             gain=gain))


def ttft_s() -> float:
    """STANDIN_TTFT_MS, else one token's time: a request of N tokens then takes N/throughput."""
    ms = os.environ.get("STANDIN_TTFT_MS")
    return float(ms) / 1000.0 if ms else 1.0 / throughput()


class Handler(RequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        """uvicorn's access line, as the API server's logger prints it."""
        code = args[1] if len(args) > 1 else ""
        sys.stdout.write(f"(APIServer pid={os.getpid()}) INFO:     127.0.0.1:"
                         f'{self.client_address[1]} - "{self.requestline}" {code}\n')
        sys.stdout.flush()

    def _reply(self, code: int, body: Any, *, text: str | None = None) -> None:
        data = (text if text is not None else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8"
                         if text is not None else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._reply(200, None, text="")
        elif path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{
                "id": STATE.served, "object": "model", "created": int(time.time()),
                "owned_by": "vllm", "root": STATE.model, "parent": None,
                "max_model_len": STATE.max_model_len}]})
        elif path in ("/metrics", "/metrics/"):
            self._reply(200, None, text=STATE.metrics())
        elif path == "/version":
            from vllm import __version__
            self._reply(200, {"version": __version__})
        else:
            self._reply(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.split("?", 1)[0] != "/v1/completions":
            self._reply(404, {"detail": "Not Found"})
            return
        if os.environ.get("STANDIN_MODE") == "fatal-in-bench":
            STATE.on_fatal()
        if body.get("model") not in (STATE.served, STATE.model):
            self._reply(404, {"error": {
                "message": f"The model `{body.get('model')}` does not exist.",
                "type": "NotFoundError", "param": "model", "code": 404}})
            return
        _noted_sampling({k: body[k] for k in SAMPLING if k in body})
        prompt = body.get("prompt") or ""
        text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
        prompt_tokens = len(prompt) if isinstance(prompt, list) else max(1, len(text.split()))
        new_tokens = int(body.get("max_tokens") or 16)
        request = uuid.uuid4().hex
        # a streamed request's cache grows token by token; a whole one is held at its full size
        STATE.hold(request, prompt_tokens + (1 if body.get("stream") else new_tokens))
        try:
            if body.get("stream"):
                self._stream(body, text, prompt_tokens, new_tokens, request=request)
                return
            self._sleep_tokens(new_tokens, text)
        finally:
            STATE.release(request)
        STATE.generate(text, prompt_tokens, new_tokens)
        self._reply(200, {**self._head(body), "choices": [self._choice(
            " token" * new_tokens, "length")], "usage": _usage(prompt_tokens, new_tokens)})

    def _head(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": body.get("model")}

    @staticmethod
    def _choice(text: str, finish: str | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                "stop_reason": None}

    @staticmethod
    def _sleep_tokens(new_tokens: int, prompt: str) -> None:
        running = STATE.running_now()
        time.sleep(ttft_s() * _load.ttft_factor(running)
                   + max(0, new_tokens - 1) * token_s(running, prompt))

    def _stream(self, body: dict[str, Any], text: str, prompt_tokens: int, n: int, *,
                request: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        head = self._head(body)
        _load.first_token(STATE.running_now, ttft_s())
        due = time.monotonic()
        for i in range(n):
            if i:  # each token on its own schedule: a late wake-up delays one token, not the rest
                due += token_s(STATE.running_now(), text)
                time.sleep(max(0.0, due - time.monotonic()))
            STATE.hold(request, prompt_tokens + i + 1)
            finish = "length" if i == n - 1 else None
            self._event({**head, "choices": [self._choice(" token", finish)], "usage": None})
        STATE.release(request)  # done before its stream closes: its client's next one finds it gone
        STATE.generate(text, prompt_tokens, n)
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({**head, "choices": [], "usage": _usage(prompt_tokens, n)})
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _event(self, data: Any) -> None:
        payload = f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()


def _usage(prompt_tokens: int, new_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + new_tokens,
            "completion_tokens": new_tokens, "prompt_tokens_details": None}
