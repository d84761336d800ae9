"""Stand-in `vllm serve MODEL ...`: the release's parser, start-up logs, failures and routes.

As vLLM 0.33.0, the port is bound at once but only listens when the server is ready
(launcher.py create_server_socket, then uvicorn): a client is refused while the model "loads".
Environment (a configuration's `env` sets them):
  STANDIN_MODE        ok (default) | crash | fatal-then-hang | fatal-in-bench | silent-hang |
                      children | slow-bench | bench-fails (the last two: the server is fine,
                      bench serve misbehaves)
  STANDIN_FATAL       the failure of crash / fatal-then-hang / fatal-in-bench: oom (default) |
                      engine-core | eagle3-target | attention | capability | nccl | quant-min |
                      quant-exact | quant-quark | startup-memory | startup-memory-external |
                      external-weights (_fatal.py)
  STANDIN_STARTUP_S   seconds of "loading" before the port listens (default 0.3)
  STANDIN_THROUGHPUT  output tokens/s of each request's stream (default 82.0)
  STANDIN_TTFT_MS     milliseconds before a request's first token (default 1000/THROUGHPUT)
  STANDIN_ACCEPT_LENGTH  a speculative server's typical accept length (default 2.6)
  STANDIN_BATCH_COST, STANDIN_TTFT_GROWTH, STANDIN_SPEC_GAIN, STANDIN_SPEC_DECAY  how each
                      token's time follows the requests in flight (`_load`; with one request
                      the defaults keep the figures above)
  STANDIN_FATAL_AT_RUNNING  with this many requests in flight, the fatal failure (STANDIN_FATAL)
  STANDIN_VERSION     the vLLM release to be (default 0.33.0; its flags are 0.33.0's)
  STANDIN_GPU_CAPABILITY, STANDIN_INTERCONNECT  the emulated GPUs (default 12.0 and PCIe):
                      below 8.0 a bfloat16 model fails as on a T4; with --tensor-parallel-size
                      N>1 and custom all-reduce not disabled, the release's own conditions
                      (custom_all_reduce.py) decide its "Custom allreduce is disabled ..."
                      warning: N not in [2, 4, 6, 8, 16]; N>2 on PCIe; no P2P (`none`)
  STANDIN_INFO_FILE   JSON lines appended: {"role", "pid", "pgid", "port", "time"} for the
                      server, a child, bench serve, and the moment a fatal line is logged
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from standin_httpd import ThreadingHTTPServer
from vllm import __version__
from vllm._fatal import api_server_failed, engine_failed
from vllm._flags import Shown, flag_set
from vllm._log import info, log, note
from vllm._server import STATE, Handler
from vllm._types import unknown_keys

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

BACKLOG = 2048  # uvicorn's --backlog default: a load level's requests connect at once
SUPPORTED_WORLD_SIZES = [2, 4, 6, 8, 16]  # custom_all_reduce.py:118


def _hang() -> None:
    while True:
        time.sleep(3600)


def fatal_then_hang(args: argparse.Namespace, ranks: int) -> None:
    """Log the engine's failure, then hang deaf to SIGTERM: only SIGKILL ends this server."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kind = os.environ.get("STANDIN_FATAL") or "oom"
    note("fatal")
    engine_failed(kind, args, ranks, os.getpid() + 1, running=STATE.ready)
    if kind == "engine-core":
        sys.stdout.write("\n".join(api_server_failed(-9)) + "\n")
        sys.stdout.flush()
    _hang()


def non_default(args: argparse.Namespace) -> dict[str, Any]:
    """startup.py:96's `non-default args`: what differs from the parser's defaults."""
    defaults = {row["d"]: row.get("df") for row in flag_set(__version__)["serve"]}
    return {k: v for k, v in vars(args).items()
            if k in defaults and v != defaults[k] and not isinstance(v, Shown)}


def speculative_problem(spec: dict[str, Any] | None) -> str | None:
    """What SpeculativeConfig(**speculative_config) raises (arg_utils.py:2139), or None."""
    if spec is None:
        return None
    data = flag_set(__version__)
    spec = {k.replace("-", "_"): v for k, v in spec.items()}
    problem = unknown_keys("SpeculativeConfig", spec, data["speculative_config_keys"])
    method = spec.get("method")
    if problem is None and method is not None and method not in data["speculative_methods"]:
        allowed = data["speculative_methods"]
        choices = ", ".join(f"'{m}'" for m in allowed[:-1]) + f" or '{allowed[-1]}'"
        problem = (f"1 validation error for SpeculativeConfig\nmethod\n  Input should be "
                   f"{choices} [type=literal_error, input_value={method!r}, input_type=str]\n"
                   "    For further information visit https://errors.pydantic.dev/2.14/v/"
                   "literal_error")
    return problem


def custom_allreduce(args: argparse.Namespace, ranks: int) -> None:
    """Each TP worker's CustomAllreduce.__init__ warning, under the release's conditions."""
    if ranks < 2 or args.disable_custom_all_reduce:
        return
    link = (os.environ.get("STANDIN_INTERCONNECT") or "PCIe").lower()
    for rank in range(ranks):
        where, line = "custom_all_reduce.py", 268
        if ranks not in SUPPORTED_WORLD_SIZES:
            where, line = "custom_all_reduce.py", 212
            text = (f"Custom allreduce is disabled due to an unsupported world size: {ranks}. "
                    f"Supported world sizes: {SUPPORTED_WORLD_SIZES}. To silence this warning, "
                    "specify disable_custom_all_reduce=True explicitly.")
        elif ranks > 2 and link == "pcie":
            text = ("Custom allreduce is disabled because it's not supported on more than two "
                    "PCIe-only GPUs. To silence this warning, specify "
                    "disable_custom_all_reduce=True explicitly.")
        elif link == "none":
            where, line = "custom_all_reduce.py", 283
            text = ("Custom allreduce is disabled because your platform lacks GPU P2P capability "
                    "or P2P test failed. To silence this warning, specify "
                    "disable_custom_all_reduce=True explicitly.")
        else:
            continue
        log("WARNING", where, line, text, process=f"Worker_TP{rank}", pid=os.getpid() + 10 + rank)


def _spawn_child() -> None:
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "from vllm._log import note; note('child'); time.sleep(3600)")
    subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)


def _bind(host: str, port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sys.stdout.write("Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/"
                         "dist-packages/vllm/entrypoints/launchers/launcher.py\", line 353, in "
                         f"create_server_socket\n    sock.bind(addr)\nOSError: {exc}\n")
        sys.stdout.flush()
        return None
    return sock


def _banner(model: str, args: argparse.Namespace) -> None:
    for text in ("", "       █     █     █▄   ▄█",
                 f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {__version__}",
                 f"  █▄█▀ █     █     █     █  model   {model}", "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀", ""):
        info("startup.py", 38, text)
    info("startup.py", 96, f"non-default args: {non_default(args)}")


def serve(args: argparse.Namespace) -> int:
    mode = os.environ.get("STANDIN_MODE") or "ok"
    model = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    ranks = int(args.tensor_parallel_size or 1)
    host, port = args.host or "0.0.0.0", int(args.port or 8000)
    STATE.model = model
    STATE.served = (args.served_model_name or [model])[0]
    STATE.on_fatal = lambda: fatal_then_hang(args, ranks)
    note("server", port=port)
    if mode == "fatal-in-bench":  # the fatal line comes from a request thread: no signal() there
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "silent-hang":
        _hang()
    _banner(model, args)
    sock = _bind(host, port)
    if sock is None:
        return 1
    problem = speculative_problem(args.speculative_config)
    if problem:
        sys.stdout.write(f"Traceback (most recent call last):\n  File \"{_SITE}/engine/"
                         "arg_utils.py\", line 2139, in create_speculative_config\n    return "
                         "SpeculativeConfig(**self.speculative_config)\n"
                         f"pydantic_core._pydantic_core.ValidationError: {problem}\n")
        sys.stdout.flush()
        return 1
    spec = args.speculative_config or {}
    STATE.spec_tokens = int(spec.get("num_speculative_tokens") or (3 if spec else 0))
    STATE.per_pos = [0] * STATE.spec_tokens
    STATE.max_num_seqs = int(args.max_num_seqs or STATE.max_num_seqs)
    engine_pid = os.getpid() + 1
    shown = json.dumps(spec) if spec else "None"
    info("core.py", 140, f"Initializing a V1 LLM engine (v{__version__}) with config: "
         f"model='{model}', speculative_config={shown}, tokenizer='{model}', "
         f"tensor_parallel_size={ranks}, disable_custom_all_reduce="
         f"{args.disable_custom_all_reduce}, enforce_eager={args.enforce_eager}",
         process="EngineCore", pid=engine_pid)
    custom_allreduce(args, ranks)
    capability = float(os.environ.get("STANDIN_GPU_CAPABILITY") or "12.0")
    if capability < 8.0 and (args.dtype or "auto") in ("auto", "bfloat16"):
        mode, os.environ["STANDIN_FATAL"] = "crash", "capability"
    time.sleep(float(os.environ.get("STANDIN_STARTUP_S") or 0.3))
    if mode == "crash":
        kind = os.environ.get("STANDIN_FATAL") or "oom"
        engine_failed(kind, args, ranks, engine_pid)
        sys.stdout.write("\n".join(api_server_failed(-9 if kind == "engine-core" else 1)) + "\n")
        sys.stdout.flush()
        return 1
    if mode == "fatal-then-hang":
        fatal_then_hang(args, ranks)
    info("default_loader.py", 507, "Loading weights took 0.31 seconds", process="EngineCore",
         pid=engine_pid)
    info("gpu_model_runner.py", 5089, "Model loading took 14.9 GiB memory and 0.412345 seconds",
         process="EngineCore", pid=engine_pid)
    info("kv_cache_utils.py", 1148, "GPU KV cache size: 512,000 tokens, Maximum concurrency for "
         "4,096 tokens per request: 125.00x", process="EngineCore", pid=engine_pid)
    info("core.py", 413, "init engine (profile, create kv cache, warmup model) took 0.35 s",
         process="EngineCore", pid=engine_pid)
    if mode == "children":
        _spawn_child()
    info("entry.py", 135, "Supported tasks: ['generate']")
    info("entry.py", 139, f"Starting vLLM server on http://{host}:{port}")
    info("launcher.py", 188, "Available routes are:")
    for route, methods in (("/health", "GET"), ("/metrics", "GET"), ("/v1/models", "GET"),
                           ("/v1/completions", "POST")):
        info("launcher.py", 197, f"Route: {route}, Methods: {methods}")
    httpd = ThreadingHTTPServer((host, port), Handler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = sock
    httpd.server_name, httpd.server_port = host, port
    httpd.request_queue_size = BACKLOG
    httpd.server_activate()  # listen(): from here on the port answers
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    for text in (f"Started server process [{os.getpid()}]", "Waiting for application startup.",
                 "Application startup complete."):
        sys.stdout.write(f"(APIServer pid={os.getpid()}) INFO:     {text}\n")
    sys.stdout.flush()
    STATE.ready = True
    _hang()
    return 0


_SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
