"""Stand-in `python -m sglang.launch_server`: a release's real flags, SGLang-like logs and routes.

Environment (a configuration's `env` sets them):
  STANDIN_MODE        ok (default) | crash | segfault | fatal-then-hang | fatal-in-bench |
                      silent-hang | children | slow-bench | bench-fails | bench-empty (the last
                      three: the server is fine, bench_serving misbehaves); segfault: the
                      process dies by SIGSEGV while loading weights, with no message of its own
                      (a crash in a native kernel or driver)
  STANDIN_FATAL       the fatal line of fatal-then-hang / fatal-in-bench: oom (default) | arch |
                      kv (0.5.23's "Loaded weights leave no GPU memory for the KV cache")
  STANDIN_STARTUP_S   seconds of "loading" before the server is ready (default 0.3)
  STANDIN_HEALTH_S    seconds a ready server's /health takes to generate its token (default 1.0)
  STANDIN_THROUGHPUT  output tokens/s bench_serving reports (default 82.0)
  STANDIN_HOST_FILE, STANDIN_HOST_DRIFT_PCT  a host slower with each server started on it
                      (`standin_host`)
  STANDIN_ACCEPT_LENGTH  a speculative server's typical accept length (default 2.6); each request
                      gets its own, within +-15 % of it, from its prompt
  STANDIN_FAIL_EVERY  every Nth /generate request fails (HTTP 500): completed < prompts sent
  STANDIN_BATCH_COST, STANDIN_TTFT_GROWTH, STANDIN_SPEC_GAIN, STANDIN_SPEC_DECAY  how speed and
                      latency follow the requests running together (`_load`; the defaults keep
                      one request's figures as they always were)
  STANDIN_FATAL_AT_RUNNING  with this many requests running, the fatal line (STANDIN_FATAL)
  STANDIN_VERSION     the SGLang release to be (default 0.5.2): its flag set (flags/*.json), its
                      routes and its messages
  STANDIN_GPU_CAPABILITY, STANDIN_INTERCONNECT  the emulated GPUs (default 12.0 and PCIe, the
                      seed article's 8x RTX PRO 6000): what --enable-torch-symm-mem and custom
                      all-reduce do on them, with --tp-size ranks, as the real release does
  STANDIN_INFO_FILE   JSON lines appended here: {"role", "pid", "pgid", "port", "time"} for the
                      server, each child, bench_serving, and the moment a fatal line is logged
  STANDIN_HELP_LOG    a line is appended here on every `--help`
  STANDIN_PRINT_ENV   comma-separated names of environment variables the server logs, with their
                      values, at start (as servers that dump their environment do)
  STANDIN_DIGEST_ENV  comma-separated names whose values' SHA-256 the server logs at start
                      ("environment sha256: NAME=<hex>"; "NAME unset" when it has none): a test
                      sees what the server received without the value in any log
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

import standin_host
from sglang import __version__
from sglang._flags import build_parser, version_tuple
from sglang._log import log, note
from sglang._server import STATE, Handler
from standin_httpd import ThreadingHTTPServer

BACKLOG = 2048  # uvicorn's --backlog default: a load level's requests connect at once
AT = version_tuple(__version__)
_SCHEDULER = (
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2661, in run_scheduler_process'
)
_FATAL_LINES = {
    "oom": [
        "Scheduler hit an exception: Traceback (most recent call last):",
        _SCHEDULER,
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
    "kv": [  # sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3050
        "Scheduler hit an exception: Traceback (most recent call last):",
        _SCHEDULER,
        '  File "/sgl/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 3050, in '
        "profile_max_num_token",
        "    raise ValueError(",
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.85. Raise --mem-fraction-static above 0.912 (minimum viable = "
        "1 - available/pre = 0.9113). If using speculative decoding, draft weights are now "
        "counted.",
    ],
}


def tp_size(args: argparse.Namespace) -> int:
    return int(getattr(args, "tp_size", None) or getattr(args, "tensor_parallel_size", 1) or 1)


def traceback_per_rank(lines: list[str], ranks: int) -> None:
    """Each TP rank's scheduler logs its own traceback, as a TP=8 server prints eight."""
    for rank in range(ranks):
        log(lines[0], rank=rank)
        for line in lines[1:]:
            sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fatal_then_hang(ranks: int = 1) -> None:
    """Log a fatal line, then hang deaf to SIGTERM: only SIGKILL ends this server."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    STATE.fatal = True
    lines = _FATAL_LINES[os.environ.get("STANDIN_FATAL") or "oom"]
    traceback_per_rank(lines[:-1], 1)
    note("fatal")
    sys.stdout.write(lines[-1] + "\n")
    if ranks > 1:
        traceback_per_rank(lines, ranks - 1)
    sys.stdout.flush()
    while True:
        time.sleep(3600)


def communicators(args: argparse.Namespace, ranks: int) -> list[str] | None:
    """What the release's all-reduce set-up logs on the emulated GPUs; a traceback if it dies."""
    capability = int(float(os.environ.get("STANDIN_GPU_CAPABILITY") or "12.0"))
    pcie = (os.environ.get("STANDIN_INTERCONNECT") or "PCIe").lower() == "pcie"
    for rank in range(ranks if ranks > 1 else 0):
        if ranks > 2 and pcie and not getattr(args, "disable_custom_all_reduce", False):
            name = "CustomAllreduce" if AT >= (0, 5, 10) else "Custom allreduce"
            log(f"{name} is disabled because it's not supported on more than two PCIe-only GPUs."
                " To silence this warning, specify disable_custom_all_reduce=True explicitly.",
                rank=rank)
        if not getattr(args, "enable_torch_symm_mem", False):
            continue
        name = "SymmMemCommunicator" if AT < (0, 5, 5) else "TorchSymmMemCommunicator"
        if capability in (9, 10):
            continue
        if AT >= (0, 5, 14) or capability < 9:
            log(f"{name}: Device capability {capability} not supported, communicator is not "
                "available.", rank=rank)
            continue
        table = "SYMM_MEM_ALL_REDUCE_MAX_SIZES" if AT < (0, 5, 5) else (
            "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")
        where = "symm_mem.py\", line 84" if AT < (0, 5, 5) else "torch_symm_mem.py\", line 83"
        return [
            "Scheduler hit an exception: Traceback (most recent call last):",
            _SCHEDULER,
            f'  File "/sgl/python/sglang/srt/distributed/device_communicators/{where}, in '
            "__init__",
            f"    not in {table}[self.device_capability]",
            f"KeyError: {capability}",
        ]
    return None


def _child_sleeper() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("child")
    while True:
        time.sleep(3600)


def spawn_children() -> None:
    """Scheduler-like children that ignore SIGTERM: orphans if only the leader is stopped."""
    import multiprocessing  # noqa: PLC0415 - only this mode needs them: a start imports less
    import subprocess  # noqa: PLC0415

    multiprocessing.get_context("fork").Process(target=_child_sleeper, daemon=False).start()
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "from sglang._log import note; note('child'); time.sleep(3600)"
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
    ranks = tp_size(args)
    host, port = args.host or "127.0.0.1", args.port or 30000
    STATE.model = args.model_path
    STATE.speculative = bool(args.speculative_algorithm)
    STATE.metrics_on = bool(getattr(args, "enable_metrics", False))
    STATE.on_fatal = lambda: fatal_then_hang(ranks)
    note("server", port=port)
    standin_host.note_start()
    if mode == "fatal-in-bench":  # the fatal line comes from a request thread: no signal() there
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "silent-hang":
        while True:
            time.sleep(3600)
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(args).items()))
    log(f"server_args=ServerArgs({shown})", rank=None)
    for name in filter(None, (os.environ.get("STANDIN_PRINT_ENV") or "").split(",")):
        log(f"environment: {name}={os.environ.get(name, '')}", rank=None)
    for name in filter(None, (os.environ.get("STANDIN_DIGEST_ENV") or "").split(",")):
        import hashlib  # noqa: PLC0415 - as the children's imports

        value = os.environ.get(name)
        shown = "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()
        log(f"environment sha256: {name}={shown}", rank=None)
    ThreadingHTTPServer.request_queue_size = BACKLOG
    httpd = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    for rank in range(ranks):
        log("Init torch distributed begin.", rank=rank)
    crashed = communicators(args, ranks)
    for rank in range(ranks):
        log("Init torch distributed ends. mem usage=0.12 GB", rank=rank)
    if crashed is not None:
        traceback_per_rank(crashed, ranks)
        log("Received sigquit from a child process. It usually means the child failed.", rank=None)
        return 1
    log("Load weight begin. avail mem=94.21 GB")
    time.sleep(float(os.environ.get("STANDIN_STARTUP_S") or 0.3))
    if mode == "crash":
        traceback_per_rank([
            "Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/python/sglang/srt/model_loader/loader.py", line 421, in '
            "_prepare_weights",
            "    raise RuntimeError(message)",
            f"RuntimeError: Cannot find any model weights with `{args.model_path}`",
        ], ranks)
        log("Received sigquit from a child process. It usually means the child failed.", rank=None)
        return 1
    if mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "fatal-then-hang":
        fatal_then_hang(ranks)
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
    log(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)", rank=None)
    STATE.generate("The capital city of France is", 8)  # _wait_and_warmup's request
    STATE.ready = True
    log("The server is fired up and ready to roll!", rank=None)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
