"""Protected knobs: what `--set` may never change, whatever a preset's `overridable` says.

A chat user tunes how a server runs, never what it runs: `is_protected_knob` is asked where a
preset is read (its `overridable`), where a `--set` is applied (`jobs.core.plans`) and where a
probe's `--env` is read (`jobs.evidence.probe_input.parse_env`): one list for all three.
"""

from __future__ import annotations

from jobs.core.engine_info import all_info

PROTECTED_WHY = "it chooses the model, a file or the code the server runs"


def protected_args() -> frozenset[str]:
    """Server args `--set` never changes, even when a preset lists them in `overridable`: each
    engine's `protected_args` (its engine.yaml), all of them for a preset of any engine, since
    `--engine` may run a preset on another engine than its own.

    A chat user may tune how a server runs (memory, CUDA graphs, kernels, dtype: the numbers
    under test), never what it runs: which weights, tokenizer or draft model are loaded, from
    where, with whose Python (`trust-remote-code` executes the model repo's code; custom
    loaders, logit processors and templates are code or files too). Besides these names, any
    arg ending in one of `_PROTECTED_ARG_SUFFIXES` names a file, a folder, a URL or a loader; any
    starting with `_PROTECTED_ARG_PREFIXES` fetches weights or trusts remote input; and a
    shortening of a protected name (argparse accepts `--trust-remote`) is protected too."""
    return frozenset().union(*(info.protected_args for info in all_info()))


_PROTECTED_ARG_SUFFIXES = (
    "-path", "-paths", "-dir", "file", "-config", "-loader", "-url", "-urls", "-template",
    "-revision",
)
_PROTECTED_ARG_PREFIXES = ("remote-", "trust-")

PROTECTED_ENV = frozenset({"PATH", "ENV", "BASH_ENV", "HOME", "HF_ENDPOINT", "CUDA_HOME"})
"""Environment variables `--set` and a probe's `--env` never change: they pick the interpreter,
the libraries and modules loaded into the server or the probe's ranks (PYTHONPATH with a
sitecustomize.py runs code at start-up; so does HOME, whose user site-packages a system Python
imports usercustomize.py from), or where models and compiled kernels come from. With these
names, any name starting with one of `_PROTECTED_ENV_PREFIXES` or ending with one of
`_PROTECTED_ENV_SUFFIXES` (NCCL_NET_PLUGIN, HF_HOME, TRITON_CACHE_DIR, TORCH_EXTENSIONS_DIR...)."""

_PROTECTED_ENV_PREFIXES = ("PYTHON", "LD_", "DYLD_")
_PROTECTED_ENV_SUFFIXES = ("PATH", "_HOME", "_DIR", "_CACHE", "_PLUGIN", "_FILE", "_MODULES")


def is_protected_knob(knob: str) -> bool:
    """True for a knob that may choose the model, a file or the code run (never overridable).

    Checked both as a server arg and as an environment variable, since `--set` applies an
    upper-case knob to the environment."""
    arg = knob.strip().lstrip("-").replace("_", "-").lower()
    env = knob.strip().upper()
    names = protected_args()
    return (
        arg in names
        or arg.endswith(_PROTECTED_ARG_SUFFIXES)
        or arg.startswith(_PROTECTED_ARG_PREFIXES)
        or (len(arg) >= 3 and any(name.startswith(arg) for name in names))
        or env in PROTECTED_ENV
        or env.startswith(_PROTECTED_ENV_PREFIXES)
        or env.endswith(_PROTECTED_ENV_SUFFIXES)
    )
