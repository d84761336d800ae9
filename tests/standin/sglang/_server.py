"""The stand-in server's HTTP side: the routes bench_serving and specbench call, and its counters.

Like SGLang's scheduler, the server keeps accepted-token and forward-pass counters for the
speculative accept length since it started or was last flushed (/flush_cache resets them, as
`Scheduler.flush_cache` does); every generation adds to them: the warm-up, each /health check
(one token) and every benchmark request, whose own accept length depends on its prompt (its
task category's, `standin_traffic`, within +-15 %).
/get_server_info (and /server_info from 0.5.6 on) reports the cumulative figure.
With --enable-metrics it serves GET /metrics (without it, 404, as http_server.py adds the route
only then): the scheduler's gauges as python/sglang/srt/metrics/collector.py names them, set
where it logs a decode batch: sglang:num_running_reqs (the /generate calls in flight),
sglang:token_usage (the tokens they hold over STANDIN_KV_TOKENS, default the 512000 its start
log allocates; at most 1, two decimals), sglang:num_queue_reqs and sglang:spec_accept_length
(the last request's accept length, 0 without speculation).
How its speed depends on the requests running together is `_load`'s model.
Each distinct sampling the /generate requests carry (their sampling_params' sampling
parameters) is noted once as "sampling" in $STANDIN_INFO_FILE: what tests compare a record's
`sampling` with.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable

import standin_host
import standin_load as _load
import standin_traffic
from sglang import __version__
from sglang._flags import version_tuple
from sglang._log import log
from sglang._log import note as _note
from standin_httpd import RequestHandler

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


AT = version_tuple(__version__)


class State:
    """What the server knows: readiness, the model, the speculative counters."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = False
        self.speculative = False
        self.model = ""
        self.fatal = False
        self.on_fatal: Callable[[], None] = lambda: None  # fatal-in-bench: log it and hang
        self.accepted = 0
        self.forwards = 0
        self.requests = 0
        self.generate_calls = 0
        self.metrics_on = False  # --enable-metrics
        self.held: dict[int, int] = {}  # tokens each /generate call in flight holds
        self.gauges = {"num_running_reqs": 0.0, "token_usage": 0.0, "num_queue_reqs": 0.0,
                       "spec_accept_length": 0.0}

    def decode_batch(self, own: float) -> tuple[int, float]:
        """The gauges as the scheduler sets them when it logs a decode batch: (running, usage)."""
        with self.lock:
            running = len(self.held)
            usage = round(min(1.0, sum(self.held.values()) / kv_tokens()), 2)
            self.gauges.update(num_running_reqs=running, token_usage=usage, num_queue_reqs=0,
                               spec_accept_length=own if self.speculative else 0.0)
        return running, usage

    def metrics(self) -> str:
        """/metrics as prometheus_client's multiprocess collector writes the gauges."""
        labels = f'model_name="{self.model}",engine_type="unified",tp_rank="0",pp_rank="0"'
        docs = {"num_running_reqs": "The number of running requests.",
                "token_usage": "The token usage.",
                "num_queue_reqs": "The number of requests in the waiting queue.",
                "spec_accept_length": "The average acceptance length of speculative decoding."}
        with self.lock:
            values = dict(self.gauges)
        return "".join(f"# HELP sglang:{name} {doc}\n# TYPE sglang:{name} gauge\n"
                       f"sglang:{name}{{{labels}}} {float(values[name])}\n"
                       for name, doc in docs.items())

    def generate(self, prompt: str, new_tokens: int) -> float:
        """Count one generation; its own accept length (1.0 without speculation)."""
        own = 1.0
        forwards = new_tokens
        if self.speculative and new_tokens > 1:
            digest = hashlib.sha256(prompt.encode()).digest()
            spread = 0.85 + 0.3 * (digest[0] / 255.0)  # a prompt-dependent +-15 %
            own = max(1.0, standin_traffic.accept_length(prompt, base_accept_length()) * spread)
            forwards = max(1, round(new_tokens / own))
        with self.lock:
            self.requests += 1
            self.accepted += new_tokens
            self.forwards += forwards
        return new_tokens / forwards

    def average_accept_length(self) -> float | None:
        with self.lock:
            if not self.speculative or self.forwards == 0:
                return None
            return self.accepted / self.forwards

    def flush(self) -> None:
        with self.lock:
            self.accepted = self.forwards = 0


STATE = State()


def base_accept_length() -> float:
    return float(os.environ.get("STANDIN_ACCEPT_LENGTH") or 2.6)


HOLD_S = 0.05


def kv_tokens() -> int:
    return int(os.environ.get("STANDIN_KV_TOKENS") or 512000)


def throughput() -> float:
    return standin_host.throughput(__version__)


class Handler(RequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        if self.path != "/health" or STATE.ready:
            log(f'INFO:     127.0.0.1:{self.client_address[1]} - "{self.requestline}" '
                f"{args[1] if len(args) > 1 else ''} OK", rank=None)

    def _reply(self, code: int, body: Any, *, text: bool = False) -> None:
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _server_info(self) -> dict[str, Any]:
        internal: dict[str, Any] = {"last_gen_throughput": throughput()}
        average = STATE.average_accept_length()
        if average is not None:
            internal["avg_spec_accept_length"] = average
        return {"version": __version__, "internal_states": [internal]}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        model_info = {"model_path": STATE.model, "tokenizer_path": STATE.model,
                      "is_generation": True}
        if path in ("/health", "/health_generate"):
            self._health()
        elif path == "/get_model_info" or (path == "/model_info" and AT >= (0, 5, 6)):
            self._reply(200, model_info)
        elif path == "/get_server_info" or (path == "/server_info" and AT >= (0, 5, 6)):
            self._reply(200, self._server_info())
        elif path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{
                "id": STATE.model, "object": "model", "created": int(time.time()),
                "owned_by": "sglang", "root": STATE.model, "max_model_len": 32768,
            }]})
        elif path == "/flush_cache":
            self._flush()
        elif path == "/metrics" and STATE.metrics_on:
            self._reply(200, STATE.metrics(), text=True)
        else:
            self._reply(404, {"detail": "Not Found"})

    def _health(self) -> None:
        """As SGLang's health_generate: 503 while starting, else generate one token first."""
        if not STATE.ready:
            self._reply(503, "", text=True)
            return
        time.sleep(float(os.environ.get("STANDIN_HEALTH_S") or 1.0))
        STATE.generate(f"HEALTH_CHECK_{time.time()}", 1)
        self._reply(200, "", text=True)

    def _flush(self) -> None:
        STATE.flush()
        log("Cache flushed successfully!")
        self._reply(200, "Cache flushed.\nPlease check backend logs for more details. (When "
                    "there are running or waiting requests, the operation will not be "
                    "performed.)\n", text=True)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?", 1)[0]
        if path == "/flush_cache":
            self._flush()
            return
        if path != "/generate":
            self._reply(404, {"detail": "Not Found"})
            return
        if os.environ.get("STANDIN_MODE") == "fatal-in-bench":
            STATE.on_fatal()
        with STATE.lock:
            STATE.generate_calls += 1
            calls = STATE.generate_calls
        every = int(os.environ.get("STANDIN_FAIL_EVERY") or 0)
        if every > 0 and calls % every == 0:  # the request is aborted: bench counts a failure
            log(f"Abort request: req {calls} hit an internal error", rank=0)
            self._reply(500, {"error": {"message": "Internal server error", "code": 500}})
            return
        params = body.get("sampling_params") or {}
        _noted_sampling({k: params[k] for k in SAMPLING if k in params})
        new_tokens = int(params.get("max_new_tokens") or 16)
        prompt = str(body.get("text") or body.get("input_ids") or "")
        with STATE.lock:
            STATE.held[calls] = new_tokens + 7
            running = len(STATE.held)
        if _load.dies_at(running):
            STATE.on_fatal()
        # held for its decode time at this load (at most HOLD_S: bench_serving's figures come
        # from the load model, not the clock), so that requests sent together run together
        time.sleep(min(HOLD_S, new_tokens / (throughput() * _load.speed(
            running, speculative=STATE.speculative))))
        own = STATE.generate(prompt, new_tokens)
        running, usage = STATE.decode_batch(own)
        with STATE.lock:
            STATE.held.pop(calls, None)
        spec = f"accept len: {own:.2f}, " if STATE.speculative else ""
        log(f"Decode batch, #running-req: {running}, #token: {new_tokens + 7}, token usage: "
            f"{usage:.2f}, "
            f"{spec}cuda graph: True, gen throughput (token/s): {throughput():.2f}, "
            "#queue-req: 0")
        meta: dict[str, Any] = {"prompt_tokens": 7, "completion_tokens": new_tokens,
                                "e2e_latency": new_tokens / throughput()}
        if STATE.speculative:
            meta["spec_accept_length"] = own
        self._reply(200, {"text": " token" * new_tokens, "meta_info": meta})
