"""The failure rules: real messages of each kind, precedence, fatal lines, and the loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jobs.core.rules import (
    CAUSES,
    PRECEDENCE,
    RULE_TAGS,
    Match,
    Rule,
    RuleSet,
    cause_of,
    fallback_line,
    load_rules,
    parse_rules,
)
from jobs.errors import PresetError
from tests.conftest import SEED, need_shared

# SGLang's boilerplate after every capture failure
# (sglang python/sglang/srt/model_executor/cuda_graph_runner.py, CUDA_GRAPH_CAPTURE_FAILED_MSG)
POSSIBLE_SOLUTIONS = """\
Possible solutions:
1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)
2. set --cuda-graph-max-bs to a smaller value (e.g., 16)
3. disable torch compile by not using --enable-torch-compile
4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)
Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \
"""


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules()


def tag_of(rules: RuleSet, text: str) -> str | None:
    match = rules.classify(text)
    return None if match is None else match.tag


# ---------------------------------------------------------------------------- per tag

ARCH_UNSUPPORTED = [
    # pytorch c10/cuda/CUDAException: cudaErrorNoKernelImageForDevice
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "[2026-11-30 14:02:11 TP0] Scheduler hit an exception: torch.AcceleratorError: CUDA error: "
    "no kernel image is available for execution on the device",
    # pytorch torch/cuda/__init__.py _check_cubins()
    "NVIDIA RTX PRO 6000 Blackwell Server Edition with CUDA capability sm_120 is not compatible "
    "with the current PyTorch installation.",
    # pytorch torch/cuda/__init__.py _warn_unsupported_code()
    "Your installed torch==2.6.0+cu124 does not include kernels for this GPU. Reinstall the same "
    "version against a CUDA build that does, e.g.:",
    # flashinfer compilation_context.py (jit/core.py before)
    "RuntimeError: No supported CUDA architectures found for major versions [9, 10].",
    "Exception: Capture cuda graph failed: No supported CUDA architectures found for major "
    "versions [9, 10].",
    # flashinfer gemm/gemm_base.py
    "ValueError: Unsupported SM major version: 12",
    # CUTLASS / DeepGEMM host assert text
    "RuntimeError: Assertion error (csrc/jit/compiler.hpp:98): Unsupported architecture",
    # sglang server_args.py (0.5.2)
    "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs (SM100). Please use a "
    "different backend.",
    # sglang model_executor/model_runner.py
    "RuntimeError: SGLang only supports sm75 and above.",
    # sglang layers/attention/vision.py
    "ValueError: The 'fa3' backend is not supported on Blackwell GPUs",
    # flashinfer mla/_core.py
    "ValueError: backend='cute-dsl' requires SM100/SM103/SM107, got SM120",
    # Triton's own check, quoted in sglang layers/torchao_utils.py
    "AssertionError: fp8e4nv data type is not supported on CUDA arch < 89",
    # ptxas through Triton
    "RuntimeError: Internal Triton PTX codegen error: ptxas fatal   : Value 'sm_120a' is not "
    "defined for option 'gpu-name'",
    # LLVM NVPTX backend
    "'sm_121a' is not a recognized processor for this target (ignoring processor)",
    # triton language semantic.py
    "ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are "
    "('fp8e4b15', 'fp8e5')",
    # triton runtime/errors.py OutOfResources
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 232448, "
    "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
    # cudaErrorInvalidDeviceFunction
    "RuntimeError: CUDA error: invalid device function",
]

BAD_CONFIG = [
    # cpython Lib/argparse.py
    "launch_server.py: error: unrecognized arguments: --enable-custom-allreduce-pcie",
    "launch_server.py: error: argument --attention-backend: invalid choice: 'fa9' (choose from "
    "'triton', 'torch_native', 'flashinfer', 'fa3')",
    "launch_server.py: error: argument --tp-size/--tp: expected one argument",
    "launch_server.py: error: argument --mem-fraction-static: invalid float value: 'lots'",
    "launch_server.py: error: the following arguments are required: --model-path",
    "launch_server.py: error: ambiguous option: --enable-mix could match --enable-mixed-chunk, "
    "--enable-mixed-batch",
    # sglang server_args.py (0.5.2)
    "ValueError: The arguments enable-hierarchical-cache and disable-radix-cache are mutually "
    "exclusive and cannot be used at the same time. Please use only one of them.",
    # sglang model_executor/model_runner.py
    "ValueError: Invalid attention backend: fa9",
]

OUT_OF_MEMORY = [
    # pytorch c10/cuda/CUDACachingAllocator.cpp (torch >= 2.5)
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 2 has a total "
    "capacity of 94.97 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process "
    "has 93.84 GiB memory in use.",
    # the same before 2.5
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 "
    "GiB total capacity; 77.01 GiB already allocated; 5.06 MiB free)",
    # cudaErrorMemoryAllocation raised by C10_CUDA_CHECK
    "RuntimeError: CUDA error: out of memory",
    # pytorch aten/src/ATen/cuda/CublasHandlePool.cpp
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    # sglang model_executor/model_runner.py (0.5.2), pool_configurator.py later
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
    "value: mem_fraction_static=0.5",
    # sglang mem_cache/kv_cache_configurator.py
    "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
    "Computed max_mamba_cache_size=0",
    # sglang managers/tp_worker.py
    "AssertionError: Memory pool size is too small",
    "RuntimeError: max_total_num_tokens=0 is too small for a request of 4096 tokens",
    # sglang managers/schedule_batch.py
    "Prefill out of memory. Try to lower your batch size.",
    # nccl src/include/alloc.h
    "host-17:2110:2290 [3] NCCL WARN Failed to CUDA calloc 6291456 bytes",
    "ncclUnhandledCudaError: Failed to CUDA calloc async 2432 bytes",
    "host-17:2110:2290 [3] include/alloc.h:108 NCCL WARN Cuda failure 'out of memory'",
    # Triton driver
    "RuntimeError: Triton Error [CUDA]: out of memory",
    # sglang model_executor/model_runner.py
    "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
    "min_per_gpu_memory=70.1, local_gpu_memory=94.2, local_gpu_memory * 0.9=84.8",
    # pytorch c10/core/impl/alloc_cpu.cpp
    "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
    "memory: you tried to allocate 8589934592 bytes. Error code 12 (Cannot allocate memory)",
]

CUDA_GRAPH = [
    # sglang model_executor/cuda_graph_runner.py
    "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is "
    "capturing",
    "Exception: Capture cuda graph failed: 'NoneType' object has no attribute 'shape'",
    # sglang runner/prefill_cuda_graph_runner.py (later releases)
    "Exception: Capture prefill CUDA graph failed: boom",
    # CUDA runtime error strings, as PyTorch raises them
    "RuntimeError: CUDA error: operation not permitted when stream is capturing",
    "RuntimeError: CUDA error: operation failed due to a previous error during capture",
    "RuntimeError: CUDA error: capturing stream has unjoined work",
    "RuntimeError: CUDA error: operation not permitted on an event last recorded in a capturing "
    "stream",
    "cudaErrorStreamCaptureInvalidated",
    # pytorch aten/src/ATen/cuda/CUDAGraph.cpp, CUDAGeneratorImpl.cpp
    "RuntimeError: CUDA graphs must be captured on a non-default stream. (However, after "
    "capture, it's ok to replay them on the default stream.)",
    "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.",
]

NCCL = [
    # pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL "
    "version 2.27.3",
    "ncclInternalError: Internal check failed.",
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
    "device error.",
    "ncclUnhandledCudaError: Call to CUDA function failed.",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
    "prematurely.",
    # pytorch ProcessGroupNCCL.cpp watchdog
    "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
    "[rank1]:[E1218 20:27:22 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 1] Some NCCL operations have "
    "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
    "operations might run on corrupted/incomplete data.",
    # nccl src/debug.cc
    "host-17:2110:2290 [3] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'",
    # sglang distributed/device_communicators/pynccl_wrapper.py
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
]

ASSERTION = [
    # python assert, e.g. sglang layers/moe/token_dispatcher
    "AssertionError",
    "AssertionError: num_max_dispatch_tokens_per_rank must be positive",
    "[2026-11-30 14:53:02 TP5] Scheduler hit an exception: AssertionError",
    # pytorch c10/cuda/CUDAException (cudaErrorAssert)
    "RuntimeError: CUDA error: device-side assert triggered",
    # a CUDA kernel's assert, as the device prints it
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: "
    '[3,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
    # glibc assert
    "python3: csrc/allreduce.cu:211: void init(): Assertion `world_size <= 8' failed.",
    # pytorch TORCH_INTERNAL_ASSERT
    'RuntimeError: false INTERNAL ASSERT FAILED at "../c10/cuda/CUDAGraphsC10Utils.h":73',
]

CASES = [
    *(("arch-unsupported", line) for line in ARCH_UNSUPPORTED),
    *(("bad-config", line) for line in BAD_CONFIG),
    *(("out-of-memory", line) for line in OUT_OF_MEMORY),
    *(("cuda-graph-incompatible", line) for line in CUDA_GRAPH),
    *(("nccl-error", line) for line in NCCL),
    *(("assertion", line) for line in ASSERTION),
]


@pytest.mark.parametrize(("tag", "line"), CASES)
def test_real_message_gets_its_tag(rules: RuleSet, tag: str, line: str) -> None:
    match = rules.classify(line)
    assert match is not None, line
    assert match.tag == tag, (match.rule.name, line)
    assert match.line == line.strip()


BENIGN = [
    # sglang INFO lines
    "[2026-11-30 14:52:30 TP0] Load weight begin. avail mem=94.21 GB",
    "[2026-11-30 14:52:58 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
    "avail mem=31.02 GB, mem usage=63.19 GB.",
    "[2026-11-30 14:53:00 TP0] KV Cache is allocated. #tokens: 412312, K size: 10.1 GB",
    "[2026-11-30 14:53:00 TP0] max_total_num_tokens=412312, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=4096, context_len=262144",
    "server_args=ServerArgs(model_path='/models/Kimi-K2.5', mem_fraction_static=0.85, "
    "disable_cuda_graph=False, cuda_graph_max_bs=512)",
    "[2026-11-30 14:10:02 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=20.11 GB",
    "[2026-11-30 14:10:30 TP0] Capture cuda graph end. Time elapsed: 28.01 s. mem usage=1.52 GB.",
    "[2026-11-30 14:03:40 TP0] Decode batch, #running-req: 1, #token: 1290, token usage: 0.00, "
    "cuda graph: True, gen throughput (token/s): 82.10, #queue-req: 0",
    "[2026-11-30 14:03:41 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1",
    "[2026-11-30 14:02:12] The server is fired up and ready to roll!",
    "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    # sglang model_runner.py warning, not an error
    "TP size (8)is larger than numa node number (2), in this case the available memory amount of "
    "each rank cannot be determined in prior. Please set proper `--max-total-tokens` to avoid "
    "the out-of-memory error.",
    # NCCL INFO lines
    "host-17:2110:2110 [0] NCCL INFO NCCL_ALGO set by environment to Tree",
    # nccl src/transport/net_ib.cc on a host without InfiniBand: NCCL uses sockets/P2P instead
    "host-17:2110:2110 [0] NCCL WARN NET/IB : No device found.",
    "host-17:2110:2110 [0] NCCL INFO NET/IB : No device found.",
    "host-17:2110:2110 [0] NCCL INFO cudaDriverVersion 12080",
    # the model architecture, not the GPU's
    "ValueError: Unsupported architecture: Qwen3ForCausalLM",
    # a KeyError with no architecture table above it
    "KeyError: 12",
    "KeyError: 'model.layers.12.mlp.gate.weight'",
    # PyTorch's hints under any CUDA error
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]


@pytest.mark.parametrize("line", BENIGN)
def test_benign_line_matches_nothing(rules: RuleSet, line: str) -> None:
    assert rules.classify(line) is None


def test_possible_solutions_boilerplate_alone_is_a_crash(rules: RuleSet) -> None:
    assert rules.classify(POSSIBLE_SOLUTIONS) is None
    tag, why = cause_of(log_tail=POSSIBLE_SOLUTIONS, status="failed", rules=rules)
    assert tag == "crash"
    assert why.startswith("Open an issue on GitHub")


# ---------------------------------------------------------------------------- precedence


def test_capture_failure_with_boilerplate_is_cuda_graph_not_oom(rules: RuleSet) -> None:
    log = (
        "[2026-11-30 14:10:02 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
        "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is "
        "capturing\n" + POSSIBLE_SOLUTIONS
    )
    match = rules.classify(log)
    assert match is not None
    assert match.tag == "cuda-graph-incompatible"
    assert "mem-fraction-static" not in match.line


def test_oom_during_capture_is_out_of_memory(rules: RuleSet) -> None:
    log = (
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free.\n" + POSSIBLE_SOLUTIONS
    )
    assert tag_of(rules, log) == "out-of-memory"


def test_oom_beats_assertion(rules: RuleSet) -> None:
    log = (
        "[TP5] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/layers/moe/token_dispatcher/flashinfer.py", line 143\n'
        "    assert self.num_max_dispatch_tokens_per_rank * self.world_size <= self.max\n"
        "AssertionError\n"
        "[TP2] Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 3.50 GiB.\n"
    )
    match = rules.classify(log)
    assert match is not None
    assert match.tag == "out-of-memory"
    assert match.line.startswith("[TP2]")


def test_cuda_graph_beats_nccl(rules: RuleSet) -> None:
    log = (
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, invalid usage, "
        "NCCL version 2.27.3\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Exception: Capture cuda graph failed: operation not permitted when stream is capturing\n"
    )
    assert tag_of(rules, log) == "cuda-graph-incompatible"


def test_nccl_oom_is_out_of_memory(rules: RuleSet) -> None:
    # torch NCCLUtils.hpp prints NCCL's "Last error:" under the NCCL error
    log = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.19.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 'out of memory'\n"
    )
    assert tag_of(rules, log) == "out-of-memory"


def test_arch_beats_everything(rules: RuleSet) -> None:
    log = "\n".join(line for lines in (OUT_OF_MEMORY, NCCL, ASSERTION) for line in lines[:2])
    log += "\nRuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert tag_of(rules, log) == "arch-unsupported"


def test_server_args_assertion_is_bad_config(rules: RuleSet) -> None:
    # sglang server_args.py __post_init__ (0.5.2), raised in launch_server's main process
    log = """\
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/sgl/python/sglang/launch_server.py", line 11, in <module>
    server_args = prepare_server_args(sys.argv[1:])
  File "/sgl/python/sglang/srt/server_args.py", line 2290, in from_cli_args
    return cls(**{attr: getattr(args, attr) for attr in attrs})
  File "<string>", line 281, in __init__
  File "/sgl/python/sglang/srt/server_args.py", line 648, in __post_init__
    assert self.enable_dp_attention, (
           ^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError: Please enable dp attention when setting enable_dp_lm_head."""
    match = rules.classify(log)
    assert match is not None
    assert (match.tag, match.rule.name) == ("bad-config", "server-args-check")
    assert match.line.startswith("AssertionError: Please enable dp attention")


def test_assertion_elsewhere_stays_assertion(rules: RuleSet) -> None:
    log = """\
  File "/sgl/python/sglang/srt/layers/moe/token_dispatcher/flashinfer.py", line 143, in __init__
    assert self.num_max_dispatch_tokens_per_rank * self.world_size <= self.max_num_tokens
AssertionError"""
    assert tag_of(rules, log) == "assertion"


def test_capability_key_error_needs_a_table_above(rules: RuleSet) -> None:
    # sglang distributed/device_communicators/torch_symm_mem.py (0.5.2)
    log = """\
  File "/sgl/python/sglang/srt/distributed/device_communicators/torch_symm_mem.py", line 82
    not in TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability]
KeyError: 12"""
    assert tag_of(rules, log) == "arch-unsupported"
    tuple_key = "    max_size = _MAX_CAR_SIZES[capability]\nKeyError: (12, 0)"
    assert tag_of(rules, tuple_key) == "arch-unsupported"
    far_away = log.replace("KeyError: 12", "\n".join(["x = 1"] * 6) + "\nKeyError: 12")
    assert tag_of(rules, far_away) is None


def test_traceback_source_lines_are_not_evidence(rules: RuleSet) -> None:
    # the code that raises quotes the message; only the raised line is the evidence
    log = """\
  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1317, in init_memory_pool
    raise RuntimeError(
KeyboardInterrupt"""
    assert rules.classify(log) is None
    quoted = """\
  File "/venv/lib/python3.12/site-packages/flashinfer/jit/core.py", line 117, in check_cuda_arch
    raise RuntimeError(f"No supported CUDA architectures found for major versions {majors}.")
RuntimeError: No supported CUDA architectures found for major versions [9, 10]."""
    match = rules.classify(quoted)
    assert match is not None
    assert match.line.startswith("RuntimeError: No supported")


def test_rules_follow_precedence_and_cover_every_tag(rules: RuleSet) -> None:
    order = [RULE_TAGS.index(rule.tag) for rule in rules.rules]
    assert order == sorted(order)
    assert {rule.tag for rule in rules.rules} == set(RULE_TAGS)
    assert RULE_TAGS == (*PRECEDENCE, "crash")
    assert CAUSES == (*PRECEDENCE, "timeout", "crash")
    assert all(rules.explain(tag) for tag in CAUSES)
    with pytest.raises(ValueError):
        rules.explain("gremlins")


# ---------------------------------------------------------------------------- fatal lines


@pytest.mark.parametrize(
    ("line", "tag"),
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.",
            "out-of-memory",
        ),
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "out-of-memory",
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "arch-unsupported",
        ),
        ("launch_server.py: error: unrecognized arguments: --foo", "bad-config"),
        (
            "Exception: Capture cuda graph failed: operation not permitted when stream is "
            "capturing",
            "cuda-graph-incompatible",
        ),
        (
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for "
            "600081 milliseconds before timing out.",
            "nccl-error",
        ),
        ("RuntimeError: CUDA error: device-side assert triggered", "assertion"),
    ],
)
def test_fatal_lines(rules: RuleSet, line: str, tag: str) -> None:
    match = rules.fatal_match(line)
    assert match is not None
    assert match.tag == tag
    assert match.rule.fatal


@pytest.mark.parametrize(
    "line",
    [
        # a warning: the server may go on (pytorch torch/cuda/__init__.py)
        "NVIDIA RTX PRO 6000 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.",
        "host-17:2110:2290 [3] NCCL WARN Call to bind failed: Address already in use",
        # usually followed by the more precise line NCCL's "Last error:" gives
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, unhandled cuda "
        "error",
        # a request-level assertion the server survives
        "AssertionError: The input length exceeds the context length",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "[2026-11-30 14:52:30 TP0] Load weight begin. avail mem=94.21 GB",
        "",
    ],
)
def test_non_fatal_lines(rules: RuleSet, line: str) -> None:
    assert rules.fatal_match(line) is None


def test_fatal_match_uses_previous_lines_as_context(rules: RuleSet) -> None:
    line = "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable"
    assert rules.fatal_match(line) is None
    previous = [
        '  File "/sgl/python/sglang/srt/server_args.py", line 790, in __post_init__',
        "    raise ValueError(",
    ]
    match = rules.fatal_match(line, previous)
    assert match is not None
    assert match.tag == "bad-config"


def test_fatal_match_skips_traceback_source(rules: RuleSet) -> None:
    previous = ['  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1317']
    line = '    "Not enough memory. Please try to increase --mem-fraction-static."'
    assert rules.fatal_match(line, previous) is None


# ---------------------------------------------------------------------------- cause_of


def test_cause_of_rule_timeout_crash(rules: RuleSet) -> None:
    oom = "x\nRuntimeError: CUDA error: out of memory\ny\n"
    assert cause_of(log_tail=oom, status="failed", rules=rules) == (
        "out-of-memory",
        "RuntimeError: CUDA error: out of memory",
    )
    assert cause_of(log_tail=oom, status="timeout", rules=rules)[0] == "out-of-memory"
    tag, why = cause_of(log_tail="loading...\nstill loading\n\n", status="timeout", rules=rules)
    assert tag == "timeout"
    assert "still loading" in why
    assert cause_of(
        log_tail="a\nSegmentation fault (core dumped)\n  \n", status="failed", rules=rules
    ) == ("crash", "Segmentation fault (core dumped)")
    assert cause_of(log_tail="", status="failed", rules=rules) == (
        "crash",
        "the server exited with no log",
    )
    assert cause_of(log_tail=None, status="timeout", rules=rules)[0] == "timeout"


# ---------------------------------------------------------------------------- the seed fixture


def test_seed_fixture_causes(rules: RuleSet) -> None:
    expected = {
        "eagle3-nccl-tree": "cuda-graph-incompatible",
        "eagle3-flashinfer-fusion": "arch-unsupported",
        "eagle3-torch-symm-mem": "arch-unsupported",
        "eagle3-ep-flashinfer-a2a": "out-of-memory",
    }
    found = {}
    for text in need_shared(SEED).read_text().splitlines():
        record = json.loads(text)
        tag, why = cause_of(log_tail=record["log_tail"], status=record["status"], rules=rules)
        if record["status"] == "ok":
            assert rules.classify(record["log_tail"] or "") is None, record["approach"]
            continue
        found[record["approach"]] = tag
        assert why in record["log_tail"]
        assert "Possible solutions" not in why
    assert found == expected


# ---------------------------------------------------------------------------- the loader

GOOD_RULE = """\
  - tag: out-of-memory
    name: oom
    pattern: 'CUDA out of memory'
    fatal: true
    explanation: "GPU memory ran out"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "failure_rules.yaml"
    path.write_text(text)
    return path


def test_load_minimal_file(tmp_path: Path) -> None:
    ruleset = load_rules(write(tmp_path, "ignore: ['^skip']\nrules:\n" + GOOD_RULE))
    assert [rule.name for rule in ruleset.rules] == ["oom"]
    assert ruleset.classify("skip CUDA out of memory") is None
    match = ruleset.classify("  CUDA out of memory  ")
    assert match == Match(tag="out-of-memory", line="CUDA out of memory", rule=ruleset.rules[0])
    assert isinstance(match.rule, Rule)


def test_default_load_is_cached() -> None:
    assert load_rules() is load_rules()


def test_edited_file_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path, "rules:\n" + GOOD_RULE)
    first = load_rules(path)
    path.write_text("rules:\n" + GOOD_RULE.replace("name: oom", "name: oom-again"))
    assert load_rules(path).rules[0].name == "oom-again"
    assert first.rules[0].name == "oom"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules: [\n", r"invalid YAML \(line \d+\)"),
        ("- just a list\n", "expected a mapping"),
        ("rules:\n" + GOOD_RULE + "remedies: {}\n", "unknown key 'remedies'"),
        ("rules: []\n", "'rules' must be a non-empty list"),
        ("ignore: ['(']\nrules:\n" + GOOD_RULE, "ignore #1: bad regex"),
        (
            "rules:\n" + GOOD_RULE.replace("fatal: true", "fatal: true\n    severity: 3"),
            r"rule 'oom' \(line 2\): unknown key 'severity'",
        ),
        (
            "rules:\n" + GOOD_RULE.replace("tag: out-of-memory", "tag: gremlins"),
            "rule 'oom' .*key 'tag': unknown tag 'gremlins'",
        ),
        (
            "rules:\n" + GOOD_RULE.replace("'CUDA out of memory'", "'CUDA (out'"),
            "rule 'oom' .*key 'pattern': bad regex",
        ),
        (
            "rules:\n" + GOOD_RULE.replace("    fatal: true\n", ""),
            "rule 'oom' .*missing key 'fatal'",
        ),
        ("rules:\n" + GOOD_RULE.replace("fatal: true", "fatal: maybe"), "key 'fatal' must be"),
        (
            "rules:\n" + GOOD_RULE.replace("fatal: true", "fatal: true\n    context_lines: 3"),
            "key 'context_lines' needs a 'context'",
        ),
        (
            "rules:\n" + GOOD_RULE.replace("fatal: true", "fatal: true\n    context: '['"),
            "key 'context': bad regex",
        ),
        ("rules:\n" + GOOD_RULE + GOOD_RULE, "key 'name': used twice"),
        (
            "rules:\n"
            + GOOD_RULE
            + GOOD_RULE.replace("tag: out-of-memory", "tag: bad-config").replace(
                "name: oom", "name: flags"
            ),
            r"rule 'flags' \(line 7\): key 'tag': 'bad-config' is out of precedence order",
        ),
    ],
)
def test_invalid_files(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PresetError) as caught:
        load_rules(path)
    message = str(caught.value)
    assert str(path) in message
    assert re.search(expected, message), message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match="cannot read the failure rules"):
        load_rules(tmp_path / "nope.yaml")


def test_config_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "rules:\n" + GOOD_RULE)
    (tmp_path / "engines").mkdir()  # its own engines, none with rules (tests/jobs/test_rules_merge)
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(tmp_path))
    assert [rule.name for rule in load_rules().rules] == ["oom"]


def test_parse_rules_names_its_source() -> None:
    with pytest.raises(PresetError, match="^inline: unknown key 'x'"):
        parse_rules("x: 1\nrules:\n" + GOOD_RULE, source="inline")


# ------------------------------------------------------------------------ real SGLang (issue 11)

REAL_SGLANG = [
    # sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3051
    ("out-of-memory", "ValueError: Loaded weights leave no GPU memory for the KV cache under "
     "--mem-fraction-static=0.85. Raise --mem-fraction-static above 0.912 (minimum viable = 1 - "
     "available/pre = 0.9113). If using speculative decoding, draft weights are now counted.",
     True),
    # CUDA runtime 700 and 719, as PyTorch raises them
    ("crash", "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
     True),
    ("crash", "RuntimeError: CUDA error: unspecified launch failure", True),
    # pytorch aten/src/ATen/cuda/CUDABlas.cpp
    ("arch-unsupported", "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
     "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_8F_E4M3, lda, b, "
     "CUDA_R_8F_E4M3, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, CUBLAS_GEMM_DEFAULT)`",
     False),
    # torch.distributed rendezvous
    ("nccl-error", "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for "
     "clients. 7/8 clients joined.", True),
    # sglang 0.5.23 srt/server_args.py:886 and srt/utils/network.py wait_port_available
    ("crash", "[2026-12-02 10:00:01] Port is already in use. dist_init_port=30005 "
     "port_base=30006 detokenizer_port=30007 nccl_port=30008 scheduler_input_port=30009", True),
    ("crash", "ValueError: nccl_port at 30008 is not available in 30 seconds. nccl_port at "
     "30008 is not available", True),
    # sglang 0.5.2 srt/entrypoints/engine.py:855; 0.5.23 :2006
    ("crash", "[2026-12-02 10:00:01] Rank 0 scheduler is dead. Please check if there are "
     "relevant logs.", True),
    ("out-of-memory", "RuntimeError: Rank 3 scheduler died during initialization (exit code: "
     "-9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | "
     "grep -i oom` to check.", True),
    # flashinfer-python 0.7.4 compilation_context.py:104, jit/cake_fmha_request_ordered.py:450
    ("arch-unsupported", "RuntimeError: SM 120 requires CUDA >= 12.8", False),
    ("arch-unsupported", "RuntimeError: request-ordered Cake FMHA requires compute capability "
     "10.3", False),
    # bench_serving on a host without internet (0.5.2 and 0.5.23)
    ("bad-config", "requests.exceptions.ConnectionError: HTTPSConnectionPool(host="
     "'huggingface.co', port=443): Max retries exceeded with url: /datasets/anon8231489123/"
     "ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json", False),
    ("bad-config", "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while "
     "trying to locate the file on the Hub and we cannot find the requested files in the local "
     "cache. Please check your connection and try again or make sure your Internet connection "
     "is on.", False),
]


@pytest.mark.parametrize(("tag", "line", "fatal"), REAL_SGLANG)
def test_real_sglang_messages_get_their_tag(
    rules: RuleSet, tag: str, line: str, fatal: bool
) -> None:
    match = rules.classify(line)
    assert match is not None and match.tag == tag, (match and match.rule.name, line)
    assert (rules.fatal_match(line) is not None) == fatal


def test_the_scheduler_s_exit_code_minus_9_in_0_5_2_is_the_oom_killer(rules: RuleSet) -> None:
    log = ("[2026-12-02 10:00:01] Rank 0 scheduler is dead. Please check if there are relevant "
           "logs.\n[2026-12-02 10:00:01] Exit code: -9")
    match = rules.classify(log)
    assert match is not None and match.tag == "out-of-memory"
    assert match.line.endswith("Exit code: -9")


def test_a_crash_rule_loses_to_any_cause_in_the_log(rules: RuleSet) -> None:
    log = """\
[2026-12-02 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.
[2026-12-02 10:00:01] Rank 0 scheduler is dead. Please check if there are relevant logs."""
    match = rules.classify(log)
    assert match is not None and match.tag == "out-of-memory"
    assert cause_of(log_tail="Rank 0 scheduler is dead. Please check", status="failed",
                    rules=rules) == ("crash", "Rank 0 scheduler is dead. Please check")


def test_the_benign_nccl_ib_warning_is_no_cause(rules: RuleSet) -> None:
    log = ("host-17:2110:2110 [0] NCCL WARN NET/IB : No device found.\n"
           "host-17:2110:2110 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.17<0>")
    assert rules.classify(log) is None
    assert cause_of(log_tail=log, status="failed", rules=rules)[0] == "crash"
    real = log + "\nhost-17:2110:2110 [0] NCCL WARN Cuda failure 'invalid argument'"
    assert tag_of(rules, real) == "nccl-error"


FALLBACKS = [
    # sglang 0.5.23 torch_symm_mem.py:85 (and 0.5.3 symm_mem.py:79)
    ("[2026-12-02 10:00:00 TP3] TorchSymmMemCommunicator: Device capability 12 not supported, "
     "communicator is not available.", "enable-torch-symm-mem"),
    ("[2026-12-02 10:00:00 TP0] SymmMemCommunicator: World size 8 not supported, communicator "
     "is not available.", "enable-torch-symm-mem"),
    # custom all-reduce on more than two PCIe-only GPUs: 0.5.2 and 0.5.23
    ("[2026-12-02 10:00:00 TP1] Custom allreduce is disabled because it's not supported on more "
     "than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
     "explicitly.", "disable-custom-all-reduce"),
    ("[2026-12-02 10:00:00 TP1] CustomAllreduce is disabled because your platform lacks GPU P2P "
     "capability or P2P test failed.", "disable-custom-all-reduce"),
    # sglang layers/flashinfer_comm_fusion.py (0.5.2 :25, 0.5.23 :125)
    ("[2026-12-02 10:00:00 TP0] flashinfer.comm is not available, falling back to standard "
     "implementation", "enable-flashinfer-allreduce-fusion"),
    ("[2026-12-02 10:00:00 TP0] flashinfer.comm unified allreduce_fusion API is not available, "
     "falling back to standard implementation", "enable-flashinfer-allreduce-fusion"),
]


@pytest.mark.parametrize(("line", "knob"), FALLBACKS)
def test_fallback_lines_are_no_cause_but_name_their_knob(
    rules: RuleSet, line: str, knob: str
) -> None:
    assert rules.classify(line) is None
    assert rules.fatal_match(line) is None
    match = rules.fallback_match(line)
    assert match is not None and knob in match.rule.knobs
    change = {"server_args": {knob.replace("-", "_"): True}, "env": {}}
    assert fallback_line(log_tail=line, lines=None, change=change, rules=rules) == line.strip()
    other = {"server_args": {"speculative-algorithm": "EAGLE3"}, "env": {"NCCL_ALGO": "Tree"}}
    assert fallback_line(log_tail=line, lines=None, change=other, rules=rules) is None


def test_fallback_lines_seen_live_count_when_the_tail_lost_them(rules: RuleSet) -> None:
    line = FALLBACKS[0][0]
    change = {"server_args": {"enable-torch-symm-mem": True}, "env": {}}
    found = fallback_line(log_tail="Decode batch ...", lines=[line], change=change, rules=rules)
    assert found == line


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    tag: out-of-memory\n", "key 'tag' is not for rules of kind 'fallback'"),
        ("    knobs: enable-x\n", "key 'knobs' must be a list of knob names"),
        ("    kind: maybe\n", "key 'kind': 'maybe' is not one of cause, fallback"),
    ],
)
def test_invalid_fallback_rules(tmp_path: Path, extra: str, expected: str) -> None:
    rule = ("  - kind: fallback\n    name: fb\n    pattern: 'not supported'\n"
            "    explanation: x\n" + extra)
    if "kind: maybe" in extra:
        rule = rule.replace("  - kind: fallback\n    name", "  - name")
    path = write(tmp_path, "rules:\n" + GOOD_RULE + rule)
    with pytest.raises(PresetError, match=expected):
        load_rules(path)


def test_knobs_are_for_fallback_rules_only(tmp_path: Path) -> None:
    path = write(tmp_path, "rules:\n" + GOOD_RULE.replace("fatal: true",
                                                           "fatal: true\n    knobs: [x]"))
    with pytest.raises(PresetError, match="key 'knobs' is for rules of kind 'fallback'"):
        load_rules(path)
