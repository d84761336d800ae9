"""Stand-in `python -m sglang.launch_server`: real argparse, SGLang-like logs and HTTP routes.

Environment (a configuration's `env` sets them):
  STANDIN_MODE        ok (default) | crash | fatal-then-hang | fatal-in-bench | silent-hang |
                      children | slow-bench | bench-fails | bench-empty (the last three: the
                      server is fine, bench_serving misbehaves)
  STANDIN_FATAL       the fatal line of fatal-then-hang / fatal-in-bench: oom (default) | arch
  STANDIN_STARTUP_S   seconds of "loading" before the server is ready (default 0.3)
  STANDIN_THROUGHPUT  output tokens/s bench_serving reports (default 82.0)
  STANDIN_ACCEPT_LENGTH  the accept length a speculative server reports (default 2.6)
  STANDIN_VERSION     the SGLang version to pretend (default 0.5.2; >= 0.5.10 lacks
                      --cuda-graph-max-bs, like 0.5.23)
  STANDIN_INFO_FILE   JSON lines appended here: {"role", "pid", "pgid", "port", "time"} for the
                      server, each child, bench_serving, and the moment a fatal line is logged
  STANDIN_HELP_LOG    a line is appended here on every `--help`
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sglang import __version__
from sglang._flags import build_parser

_FATAL_LINES = {
    "oom": [
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2661, in '
        "run_scheduler_process",
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, "
        "pp_rank, dp_rank)",
        '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1488, in '
        "init_memory_pool",
        "    self.req_to_token_pool = ReqToTokenPool(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a "
        "total capacity of 94.97 GiB of which 1.12 GiB is free. Including non-PyTorch memory, "
        "this process has 93.80 GiB memory in use. Of the allocated memory 91.20 GiB is "
        "allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated.",
    ],
    "arch": [
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 312, in '
        "initialize",
        "    self.init_cublas()",
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on "
        "the device",
    ],
}
_state: dict[str, Any] = {"ready": False, "speculative": False, "model": "", "fatal": False}


def log(message: str, *, rank: int | None = 0) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    prefix = f"[{stamp} TP{rank}]" if rank is not None else f"[{stamp}]"
    sys.stdout.write(f"{prefix} {message}\n")
    sys.stdout.flush()


def note(role: str, **extra: Any) -> None:
    path = os.environ.get("STANDIN_INFO_FILE")
    if not path:
        return
    entry = {"role": role, "pid": os.getpid(), "pgid": os.getpgid(0), "time": time.time()}
    entry.update(extra)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def fatal_then_hang() -> None:
    """Log a fatal line, then hang deaf to SIGTERM: only SIGKILL ends this server."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _state["fatal"] = True
    lines = _FATAL_LINES[os.environ.get("STANDIN_FATAL") or "oom"]
    log(lines[0])
    for line in lines[1:-1]:
        sys.stdout.write(line + "\n")
    note("fatal")
    sys.stdout.write(lines[-1] + "\n")
    sys.stdout.flush()
    while True:
        time.sleep(3600)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        if self.path != "/health" or _state["ready"]:
            log(f'INFO:     127.0.0.1:{self.client_address[1]} - "{self.requestline}" '
                f"{args[1] if len(args) > 1 else ''} OK", rank=None)

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/health":
            self._reply(200 if _state["ready"] else 503, {})
        elif self.path == "/get_model_info":
            self._reply(200, {"model_path": _state["model"], "tokenizer_path": _state["model"],
                              "is_generation": True})
        elif self.path == "/get_server_info":
            internal: dict[str, Any] = {"last_gen_throughput": _throughput()}
            if _state["speculative"]:
                internal["avg_spec_accept_length"] = _accept_length()
            self._reply(200, {"version": __version__, "internal_states": [internal]})
        else:
            self._reply(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/generate":
            self._reply(404, {"detail": "Not Found"})
            return
        if os.environ.get("STANDIN_MODE") == "fatal-in-bench":
            fatal_then_hang()
        new_tokens = int((body.get("sampling_params") or {}).get("max_new_tokens") or 16)
        spec = f"accept len: {_accept_length():.2f}, " if _state["speculative"] else ""
        log(f"Decode batch, #running-req: 1, #token: {new_tokens + 7}, token usage: 0.00, "
            f"{spec}cuda graph: True, gen throughput (token/s): {_throughput():.2f}, "
            "#queue-req: 0")
        meta: dict[str, Any] = {"prompt_tokens": 7, "completion_tokens": new_tokens,
                                "e2e_latency": new_tokens / _throughput()}
        if _state["speculative"]:
            meta["spec_accept_length"] = _accept_length()
        self._reply(200, {"text": " token" * new_tokens, "meta_info": meta})


def _throughput() -> float:
    return float(os.environ.get("STANDIN_THROUGHPUT") or 82.0)


def _accept_length() -> float:
    return float(os.environ.get("STANDIN_ACCEPT_LENGTH") or 2.6)


def _child_sleeper() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("child")
    while True:
        time.sleep(3600)


def spawn_children() -> None:
    """Scheduler-like children that ignore SIGTERM: orphans if only the leader is stopped."""
    multiprocessing.get_context("fork").Process(target=_child_sleeper, daemon=False).start()
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "from sglang.launch_server import note; note('child'); time.sleep(3600)"
    )
    subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        help_log = os.environ.get("STANDIN_HELP_LOG")
        if help_log:
            with open(help_log, "a", encoding="utf-8") as handle:
                handle.write(f"{__version__}\n")
    args = build_parser(__version__).parse_args(argv)
    mode = os.environ.get("STANDIN_MODE") or "ok"
    _state["model"] = args.model_path
    _state["speculative"] = bool(args.speculative_algorithm)
    note("server", port=args.port)
    if mode == "fatal-in-bench":  # the fatal line comes from a request thread: no signal() there
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "silent-hang":
        while True:
            time.sleep(3600)
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    log(f"server_args=ServerArgs({shown})", rank=None)
    httpd = ThreadingHTTPServer((args.host, args.port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    log("Init torch distributed begin.")
    log("Init torch distributed ends. mem usage=0.12 GB")
    log("Load weight begin. avail mem=94.21 GB")
    time.sleep(float(os.environ.get("STANDIN_STARTUP_S") or 0.3))
    if mode == "crash":
        log("Scheduler hit an exception: Traceback (most recent call last):")
        sys.stdout.write(
            '  File "/sgl/python/sglang/srt/model_loader/loader.py", line 421, in '
            "_prepare_weights\n"
            "    raise RuntimeError(message)\n"
            f"RuntimeError: Cannot find any model weights with `{args.model_path}`\n"
        )
        log("Received sigquit from a child process. It usually means the child failed.", rank=None)
        return 1
    if mode == "fatal-then-hang":
        fatal_then_hang()
    log("Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=23.40 GB, "
        "mem usage=70.81 GB.")
    log("KV Cache is allocated. #tokens: 512000, KV size: 8.20 GB")
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=14.90 GB")
    log("Capture cuda graph end. Time elapsed: 0.31 s. mem usage=1.20 GB. avail mem=13.70 GB.")
    if mode == "children":
        spawn_children()
    log(f"INFO:     Started server process [{os.getpid()}]", rank=None)
    log("INFO:     Waiting for application startup.", rank=None)
    log("INFO:     Application startup complete.", rank=None)
    log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)",
        rank=None)
    _state["ready"] = True
    log("The server is fired up and ready to roll!", rank=None)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
