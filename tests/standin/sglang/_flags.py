"""`launch_server`'s command line: a subset of SGLang's real flags, names and help verbatim.

Taken from python/sglang/srt/server_args.py of SGLang 0.5.2 (argparse, aliases included). From
0.5.10 on (STANDIN_VERSION), `--cuda-graph-max-bs` is gone in favour of per-phase flags, as in
SGLang 0.5.23. `--enable-custom-allreduce-pcie` is the seed session's own SGLang build.
"""

from __future__ import annotations

import argparse
from typing import Any

_SPEC_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE"]
_A2A_BACKENDS = ["none", "deepep", "mooncake", "flashinfer"]

# (option strings, argparse keyword arguments)
COMMON: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--model-path", "--model"), {"type": str, "required": True,
     "help": "The path of the model weights. This can be a local folder or a Hugging Face "
             "repo ID."}),
    (("--tokenizer-path",), {"type": str, "help": "The path of the tokenizer."}),
    (("--trust-remote-code",), {"action": "store_true",
     "help": "Whether or not to allow for custom models defined on the Hub in their own "
             "modeling files."}),
    (("--context-length",), {"type": int,
     "help": "The model's maximum context length. Defaults to None (will use the value from "
             "the model's config.json instead)."}),
    (("--host",), {"type": str, "default": "127.0.0.1", "help": "The host of the HTTP server."}),
    (("--port",), {"type": int, "default": 30000, "help": "The port of the HTTP server."}),
    (("--dtype",), {"type": str, "default": "auto",
     "choices": ["auto", "half", "float16", "bfloat16", "float", "float32"],
     "help": "Data type for model weights and activations."}),
    (("--kv-cache-dtype",), {"type": str, "default": "auto",
     "choices": ["auto", "fp8_e5m2", "fp8_e4m3"], "help": "Data type for kv cache storage."}),
    (("--quantization",), {"type": str, "help": "The quantization method."}),
    (("--mem-fraction-static",), {"type": float,
     "help": "The fraction of the memory used for static allocation (model weights and KV "
             "cache memory pool). Use a smaller value if you see out-of-memory errors."}),
    (("--max-running-requests",), {"type": int, "help": "The maximum number of running requests."}),
    (("--chunked-prefill-size",), {"type": int,
     "help": "The maximum number of tokens in a chunk for the chunked prefill. Setting this "
             "to -1 means disabling chunked prefill."}),
    (("--tensor-parallel-size", "--tp-size"), {"type": int, "default": 1,
     "help": "The tensor parallelism size."}),
    (("--data-parallel-size", "--dp-size"), {"type": int, "default": 1,
     "help": "The data parallelism size."}),
    (("--random-seed",), {"type": int, "help": "The random seed."}),
    (("--log-level",), {"type": str, "default": "info",
     "help": "The logging level of all loggers."}),
    (("--attention-backend",), {"type": str,
     "choices": ["fa3", "flashinfer", "triton", "torch_native", "trtllm_mha", "trtllm_mla"],
     "help": "Choose the kernels for attention layers."}),
    (("--speculative-algorithm",), {"type": str, "choices": _SPEC_ALGORITHMS,
     "help": "Speculative algorithm."}),
    (("--speculative-draft-model-path", "--speculative-draft-model"), {"type": str,
     "help": "The path of the draft model weights. This can be a local folder or a Hugging "
             "Face repo ID."}),
    (("--speculative-num-steps",), {"type": int,
     "help": "The number of steps sampled from draft model in Speculative Decoding."}),
    (("--speculative-eagle-topk",), {"type": int,
     "help": "The number of tokens sampled from the draft model in eagle2 each step."}),
    (("--speculative-num-draft-tokens",), {"type": int,
     "help": "The number of tokens sampled from the draft model in Speculative Decoding."}),
    (("--expert-parallel-size", "--ep-size", "--ep"), {"type": int, "default": 1,
     "help": "The expert parallelism size."}),
    (("--moe-a2a-backend",), {"type": str, "choices": _A2A_BACKENDS, "default": "none",
     "help": "Choose the backend for MoE A2A."}),
    (("--enable-flashinfer-allreduce-fusion",), {"action": "store_true",
     "help": "Enable FlashInfer allreduce fusion with Residual RMSNorm."}),
    (("--disable-radix-cache",), {"action": "store_true",
     "help": "Disable RadixAttention for prefix caching."}),
    (("--cuda-graph-bs",), {"type": int, "nargs": "+",
     "help": "Set the list of batch sizes for cuda graph."}),
    (("--disable-cuda-graph",), {"action": "store_true", "help": "Disable cuda graph."}),
    (("--disable-custom-all-reduce",), {"action": "store_true",
     "help": "Disable the custom all-reduce kernel and fall back to NCCL."}),
    (("--enable-torch-symm-mem",), {"action": "store_true",
     "help": "Enable using torch symm mem for all-reduce kernel and fall back to NCCL."}),
    (("--enable-torch-compile",), {"action": "store_true",
     "help": "Optimize the model with torch.compile. Experimental feature."}),
]
BEFORE_0_5_10: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--cuda-graph-max-bs",), {"type": int,
     "help": "Set the maximum batch size for cuda graph. It will extend the cuda graph capture "
             "batch size to this value."}),
    (("--enable-custom-allreduce-pcie",), {"action": "store_true",
     "help": "Use the custom all-reduce kernel over PCIe (one-shot and two-shot)."}),
]
SINCE_0_5_10: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--cuda-graph-max-bs-decode",), {"type": int,
     "help": "Maximum batch size captured for the decode phase."}),
    (("--cuda-graph-max-bs-prefill",), {"type": int,
     "help": "Maximum batch size captured for the prefill phase."}),
    (("--cuda-graph-backend-decode",), {"type": str,
     "help": "Backend for the decode phase. Folds into cuda_graph_config[decode].backend."}),
]


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def build_parser(version: str) -> argparse.ArgumentParser:
    """The server's parser as SGLang `version` builds it (prog: the module file's name)."""
    parser = argparse.ArgumentParser()
    extra = SINCE_0_5_10 if version_tuple(version) >= (0, 5, 10) else BEFORE_0_5_10
    for names, kwargs in COMMON + extra:
        parser.add_argument(*names, **kwargs)
    return parser
