"""vLLM 0.33.0's own failure messages, and how its processes log them when the engine dies.

Each STANDIN_FATAL names one: the exception a real engine raises, the frames above it (paths
as in a CUDA image's site-packages, lines as in the 0.33.0 wheel), where it was raised:
  oom           vllm/v1/core/kv_cache_planning.py:57 ValueError "No available memory for the
                cache blocks. ..."
  engine-core   vllm/v1/engine/utils.py:1473 RuntimeError "Engine core initialization failed.
                See root cause above. Failed core proc(s): {'EngineCore': -9}" with no cause
                above it (the engine process was killed)
  eagle3-target vllm/v1/worker/gpu_model_runner.py:5174 RuntimeError "Model does not support
                EAGLE3 interface but aux_hidden_state_outputs was requested"
  attention     vllm/platforms/cuda.py:443 ValueError "Selected backend ... is not valid for this
                configuration. Reason: ['compute capability not supported']"
  capability    vllm/platforms/cuda.py:650 ValueError "Bfloat16 is only supported on GPUs with
                compute capability of at least 8.0. ..." (also on its own when
                STANDIN_GPU_CAPABILITY is below 8.0 and --dtype is auto or bfloat16)
  nccl          vllm/distributed/device_communicators/pynccl_wrapper.py:464 RuntimeError "NCCL
                error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
  quant-min     vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
                :410 RuntimeError "Quantization scheme is not supported for the current GPU. Min
                capability: 90. Current capability: 89."
  quant-exact   the same function's :402 (match_exact) "... Required capability: 100. ..."
  quant-quark   .../quantization/quark/quark.py:357 RuntimeError "... Min capability: 94.
                Current capability: 90."
  startup-memory  vllm/v1/worker/utils.py:762 ValueError "Free memory on device cuda:0 (...) on
                startup is less than desired GPU memory utilization (0.9, ... GiB). ..."
  startup-memory-external  utils.py:741, the same with weights held by another process: "...
                on startup is less than the engine's budget after excluding external process's
                weights (0.9, ... GiB). ..."
  external-weights  utils.py:731, those weights alone above the budget: "Externally held weights
                on device cuda:0 (...) exceed the desired GPU memory utilization (0.9, ...). ..."
The engine logs "EngineCore failed to start." (vllm/v1/engine/core.py:1584, logger.exception:
the traceback carries the prefix on every line); with TP>1 each Worker_TP<rank> logs the
traceback first and the engine's own error is "Worker failed with error ..."
(vllm/v1/executor/multiproc_executor.py:525; WorkerProc: multiproc_executor.py:1057).
"""

from __future__ import annotations

import argparse
import os

from vllm._log import log

SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
_CORE = [
    f'  File "{SITE}/v1/engine/core.py", line 1555, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    f'  File "{SITE}/v1/engine/core.py", line 1232, in __init__',
    "    super().__init__(",
    f'  File "{SITE}/v1/engine/core.py", line 163, in __init__',
    "    kv_cache_config = self._initialize_kv_caches(vllm_config)",
]

_QT = f"{SITE}/model_executor/layers/quantization"
_QUANT = {  # kind -> (the frames down to the raise, the exception line), 0.33.0's words
    "quant-min": ([f'  File "{_QT}/compressed_tensors/compressed_tensors.py", line 994, in '
                   "get_scheme", "    self._check_scheme_supported(scheme.get_min_capability())",
                   f'  File "{_QT}/compressed_tensors/compressed_tensors.py", line 410, in '
                   "_check_scheme_supported"],
                  "RuntimeError: Quantization scheme is not supported for the current GPU. Min "
                  "capability: 90. Current capability: 89."),
    "quant-exact": ([f'  File "{_QT}/compressed_tensors/compressed_tensors.py", line 402, in '
                     "_check_scheme_supported"],
                    "RuntimeError: Quantization scheme is not supported for the current GPU. "
                    "Required capability: 100. Current capability: 90."),
    "quant-quark": ([f'  File "{_QT}/quark/quark.py", line 948, in init_scheme',
                     "    self._check_scheme_supported(scheme.get_min_capability())",
                     f'  File "{_QT}/quark/quark.py", line 357, in _check_scheme_supported'],
                    "RuntimeError: Quantization scheme is not supported for the current GPU. Min "
                    "capability: 94. Current capability: 90."),
}
_STARTUP = {  # kind -> (the line of vllm/v1/worker/utils.py request_memory's raise, the error)
    "startup-memory": (762, (
        "ValueError: Free memory on device cuda:0 (35.21/79.19 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or "
        "reduce GPU memory used by other processes.")),
    "startup-memory-external": (741, (
        "ValueError: Free memory on device cuda:0 (10.5/79.19 GiB) on startup is less than the "
        "engine's budget after excluding external process's weights (0.9, 41.2 GiB). Decrease "
        "GPU memory utilization or reduce GPU memory used by other processes.")),
    "external-weights": (731, (
        "ValueError: Externally held weights on device cuda:0 (75.0/79.19 GiB) exceed the "
        "desired GPU memory utilization (0.9, 71.27 GiB). Increase GPU memory utilization or "
        "reduce GPU memory used by other processes.")),
}


def frames(kind: str, args: argparse.Namespace) -> tuple[list[str], str]:
    """(traceback frames, the exception line) of a STANDIN_FATAL kind."""
    if kind == "oom":
        return [*_CORE,
                f'  File "{SITE}/v1/core/kv_cache_planning.py", line 57, in '
                "_check_enough_kv_cache_memory",
                "    raise ValueError("], (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
            "memory reservation on the CPU backend, despite its name). See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    if kind == "eagle3-target":
        return [_CORE[0], _CORE[1],
                f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 5174, in '
                "_setup_eagle3_aux_hidden_state_outputs",
                "    raise RuntimeError("], (
            "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs "
            "was requested")
    if kind == "attention":
        chosen = (getattr(args, "attention_backend", None) or "FLASHMLA").upper()
        return [_CORE[0], _CORE[1],
                f'  File "{SITE}/platforms/cuda.py", line 443, in get_attn_backend_cls',
                "    raise ValueError("], (
            f"ValueError: Selected backend AttentionBackendEnum.{chosen} is not valid for this "
            "configuration. Reason: ['compute capability not supported']")
    if kind == "capability":
        cap = os.environ.get("STANDIN_GPU_CAPABILITY") or "7.5"
        return [_CORE[0], _CORE[1],
                f'  File "{SITE}/platforms/cuda.py", line 650, in check_if_supports_dtype',
                "    raise ValueError("], (
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
            f"8.0. Your Tesla T4 GPU has compute capability {cap}. You can use float16 instead "
            "by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.")
    if kind in _QUANT:
        where, error = _QUANT[kind]
        return [_CORE[0], _CORE[1], *where, "    raise RuntimeError("], error
    if kind in _STARTUP:
        line, error = _STARTUP[kind]
        return [_CORE[0], _CORE[1],
                f'  File "{SITE}/v1/worker/gpu_worker.py", line 542, in init_device',
                "    self.requested_memory = request_memory(",
                f'  File "{SITE}/v1/worker/utils.py", line {line}, in request_memory',
                "    raise ValueError("], error
    if kind == "nccl":
        return [_CORE[0], _CORE[1],
                f'  File "{SITE}/distributed/device_communicators/pynccl_wrapper.py", line 464, '
                "in NCCL_CHECK",
                '    raise RuntimeError(f"NCCL error: {error_str}")'], (
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details)")
    return [], ""  # engine-core: the process died with no Python error


def engine_failed(kind: str, args: argparse.Namespace, ranks: int, pid: int, *,
                  running: bool = False) -> None:
    """The engine's (and its workers') error records for a failure of `kind`; `running`: it
    died serving (core.py:1586 "EngineCore encountered a fatal error."), not starting."""
    lines, error = frames(kind, args)
    if not error:
        return
    body = ["Traceback (most recent call last):", *lines, error]
    if ranks > 1:
        for rank in range(ranks):
            log("ERROR", "multiproc_executor.py", 1057, "\n".join(["WorkerProc failed to start.",
                *body]), process=f"Worker_TP{rank}", pid=pid + 10 + rank)
        error = ("RuntimeError: Worker failed with error '" + error.split(": ", 1)[1]
                 + "', please check the stack trace above for the root cause")
        body = ["Traceback (most recent call last):", _CORE[0], _CORE[1],
                f'  File "{SITE}/v1/executor/multiproc_executor.py", line 525, in '
                "collective_rpc", "    raise RuntimeError(", error]
    line, said = (1586, "EngineCore encountered a fatal error.") if running else (
        1584, "EngineCore failed to start.")
    log("ERROR", "core.py", line, "\n".join([said, *body]), process="EngineCore", pid=pid)


def api_server_failed(core_exit: int) -> list[str]:
    """The API server's traceback once the engine is gone (printed, then it exits 1)."""
    return [
        "Traceback (most recent call last):",
        f'  File "{SITE}/entrypoints/cli/main.py", line 117, in main',
        "    args.dispatch_function(args)",
        f'  File "{SITE}/v1/engine/utils.py", line 1473, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        f"proc(s): {{'EngineCore': {core_exit}}}",
    ]
