"""What a collectives probe is asked to measure (docs/contracts.md "Evidence for the why"), read and
checked before any rank starts: bad input is a `ProbeInputError` (exit 2, one line).

Sizes are bytes, plain (`4096`) or with a binary suffix as nccl-tests reads them: `4K`, `4KiB`,
`1M`, `1MiB`, `1G`, `1GiB` (each a power of 1024). `KB`, `MB` and `GB` are refused as ambiguous
(1000 or 1024?) rather than guessed.

`--env` follows the rules of a preset's env and `--set` (docs/contracts.md "Secrets stay
references", docs/security.md): a variable that chooses the code or the files the ranks load
(`protected_knobs`, the one list) is never accepted from a person (`parse_env`); a secret-looking
name takes `${NAME}` only, read from the environment of the process that starts the ranks
(`for_this_host` checks it is there; `jobs.evidence.collectives` resolves it), so the request,
the store, the posts and the probe's JSON hold the reference, never the value.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.plans import is_literal_secret, is_protected_knob, resolve_env
from jobs.errors import InfraError, UserError

DEFAULT_WORLD = 2
DEFAULT_SIZES = tuple(4096 * 4**i for i in range(6))  # 4 KiB to 4 MiB by x4
DEFAULT_ITERS = 20
WARMUP = 5  # untimed iterations per size before the timed ones (nccl-tests' default)
DEFAULT_TIMEOUT_S = 120.0
MAX_BYTES = 1 << 30
MAX_ITERS = 10_000
MAX_GLOO_WORLD = 64
BACKENDS = ("nccl", "gloo")
OWN_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_UNITS = {"": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GIB": 1 << 30}
_SIZE = re.compile(r"\s*(\d+)\s*([A-Za-z]*)\s*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProbeInputError(UserError):
    """A probe asked for something it cannot measure: exit 2."""


@dataclass(frozen=True)
class ProbeRequest:
    """One probe: `world` ranks on `backend`, each size timed `iters` times after `warmup`."""

    world: int
    backend: str | None  # None: not named yet (`for_this_host` chooses)
    sizes: tuple[int, ...]
    iters: int = DEFAULT_ITERS
    env: tuple[tuple[str, str], ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    warmup: int = WARMUP


def to_bytes(text: str) -> int:
    """`4096`, `4K`, `4KiB`, `1M`... as a number of bytes (checked against 0 and 1 GiB)."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        hint = " (say 4K or 4KiB for 4096, or 4000)" if unit in ("KB", "MB", "GB") else ""
        raise ProbeInputError(f"not a size in bytes: {text!r}{hint}")
    size = int(match.group(1)) * _UNITS[unit]
    if not 0 < size <= MAX_BYTES:
        raise ProbeInputError(f"a size must be more than 0 bytes and at most 1 GiB, got {text}")
    return size


def parse_sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list of sizes, ascending and each once."""
    words = [w for w in text.split(",") if w.strip()]
    if not words:
        raise ProbeInputError("--sizes needs at least one size")
    return tuple(sorted({to_bytes(w) for w in words}))


PROTECTED_WHY = "it chooses the code or the files the ranks load (docs/security.md)"


def parse_env(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` items typed by a person (the CLI, chat) as sorted pairs, checked as `--set`
    is: besides `checked_env`'s rules, a protected variable (`is_protected_knob`: PYTHONPATH,
    LD_PRELOAD, BASH_ENV, PATH...) is refused. A preset's own env (the evidence a batch
    probes) may name one: its file is reviewed like code."""
    pairs: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not _KEY.fullmatch(key):
            shown = f"{key}=..." if eq else item  # never echo a value
            raise ProbeInputError(f"--env needs KEY=VALUE with KEY a variable name, "
                                  f"got {shown[:60]!r}")
        if is_protected_knob(key):
            raise ProbeInputError(f"--env {key} is never accepted: {PROTECTED_WHY}")
        pairs[key] = value
    return checked_env(pairs)


def checked_env(env: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """A probe's environment as sorted pairs: variable names, none of the rendezvous variables
    (the probe's own), no NUL character, and no secret in clear (`${NAME}` only)."""
    pairs = {k: str(v) for k, v in (env.items() if isinstance(env, Mapping) else env)}
    for key, value in pairs.items():
        if not _KEY.fullmatch(key):
            raise ProbeInputError(f"--env needs KEY=VALUE with KEY a variable name, got {key!r}")
        if key in OWN_ENV:
            raise ProbeInputError(f"--env {key} is set by the probe itself for each rank")
        if "\0" in value:
            raise ProbeInputError(f"--env {key} holds a NUL character, which no process can be "
                                  "given")
        if is_literal_secret(key, value):
            raise ProbeInputError(
                f"--env {key} holds a literal secret: write {key}=${{{key}}} (or another "
                "${NAME}) and set that variable in the worker's environment")
    return tuple(sorted(pairs.items()))


def unset_references(env: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """One line per `${NAME}` of a probe's env that this process's environment lacks."""
    resolved = resolve_env(dict(env), environ=os.environ)
    return tuple("--env " + line.removeprefix("specbench: env ") for line in resolved.unset)


def to_request(*, world: int = DEFAULT_WORLD, backend: str | None = None,
               sizes: Iterable[int] = DEFAULT_SIZES, iters: int = DEFAULT_ITERS,
               env: Mapping[str, str] | Iterable[tuple[str, str]] = (),
               timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeRequest:
    """A checked request for this host (`asked`, then `for_this_host`)."""
    return for_this_host(asked(world=world, backend=backend, sizes=sizes, iters=iters, env=env,
                               timeout_s=timeout_s))


def asked(*, world: int = DEFAULT_WORLD, backend: str | None = None,
          sizes: Iterable[int] = DEFAULT_SIZES, iters: int = DEFAULT_ITERS,
          env: Mapping[str, str] | Iterable[tuple[str, str]] = (),
          timeout_s: float = DEFAULT_TIMEOUT_S) -> ProbeRequest:
    """The request as asked, checked wherever it is typed (a bot's host may have no torch and no
    GPU): everything but what the host running it has. `backend` stays None when not named."""
    if world < 2:
        raise ProbeInputError(f"--world must be at least 2 (an all-reduce needs two ranks), "
                              f"got {world}")
    if backend is not None and backend not in BACKENDS:
        raise ProbeInputError(f"unknown backend {backend!r}: nccl or gloo")
    if backend == "gloo" and world > MAX_GLOO_WORLD:
        raise ProbeInputError(f"--world {world} is more than gloo runs: at most {MAX_GLOO_WORLD}")
    if not 1 <= iters <= MAX_ITERS:
        raise ProbeInputError(f"--iters must be from 1 to {MAX_ITERS}, got {iters}")
    if not timeout_s > 0:
        raise ProbeInputError(f"--timeout must be more than 0 seconds, got {timeout_s:g}")
    checked = tuple(sorted({to_bytes(str(s)) for s in sizes}))
    if not checked:
        raise ProbeInputError("--sizes needs at least one size")
    return ProbeRequest(world=world, backend=backend, sizes=checked, iters=iters,
                        env=checked_env(env), timeout_s=timeout_s)


def for_this_host(request: ProbeRequest) -> ProbeRequest:
    """The request checked against this host: without a backend, nccl when this host has
    `world` GPUs, else gloo; nccl needs that many GPUs, gloo a CPU per rank; every `${NAME}`
    of its env set in this process's environment."""
    if importlib.util.find_spec("torch") is None:  # before any rank: one line (jobs.extras)
        raise ProbeInputError("the collectives probe needs torch, which this installation "
                              "lacks: pip install 'specbench[local]'")
    for line in unset_references(request.env)[:1]:
        raise ProbeInputError(line)
    world, backend = request.world, request.backend
    gpus = gpu_count() if backend in (None, "nccl") else 0  # counted once: it may import torch
    if backend is None:
        backend = "nccl" if gpus >= world else "gloo"
    if backend == "nccl":
        if gpus == 0:
            raise ProbeInputError("--backend nccl needs CUDA, and torch sees no GPU here; "
                                  "use --backend gloo")
        if world > gpus:
            raise ProbeInputError(f"--world {world} is more than the {gpus} GPU(s) here")
    else:
        cpus = os.cpu_count() or 1
        if world > min(cpus, MAX_GLOO_WORLD):
            raise ProbeInputError(f"--world {world} is more than gloo runs here: one rank per "
                                  f"CPU ({cpus}), at most {MAX_GLOO_WORLD}")
    return dataclasses.replace(request, backend=backend)


def request_of(data: Mapping[str, Any]) -> ProbeRequest:
    """The inverse of `dataclasses.asdict(request)` (a queued probe travels as JSON)."""
    return ProbeRequest(
        world=int(data["world"]), backend=data.get("backend"),
        sizes=tuple(int(s) for s in data["sizes"]), iters=int(data["iters"]),
        env=tuple((str(k), str(v)) for k, v in data.get("env", ())),
        timeout_s=float(data["timeout_s"]), warmup=int(data.get("warmup", WARMUP)))


GPU_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd")
"""Device files one of which is there wherever torch can see a GPU: NVIDIA's, WSL 2's, ROCm's."""


def gpu_count() -> int:
    """The GPUs torch sees here (0 without CUDA); torch is imported only when asked, and not
    at all on a host with none of `GPU_NODES` (a second of a CPU host's batch, for nothing).
    The count asks NVML, not the CUDA driver (PYTORCH_NVML_BASED_CUDA_CHECK): a worker that
    counted GPUs can still fork processes that use CUDA."""
    if importlib.util.find_spec("torch") is None:
        raise InfraError("the collectives probe needs torch, which is not installed here "
                         "(pip install 'specbench[local]')")
    if not any(os.path.exists(node) for node in GPU_NODES):
        return 0
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
