"""What changed under a series between two points (docs/contracts.md "Regression watch", "The
alert"): the stack diff and whether it is an environment change.

A point's stack is the fingerprint's engine, engine version, torch, CUDA, driver, NCCL, GPU and
GPU count, the model's revision and the host. A changed GPU, GPU count or host is an
environment change: the series moved because it ran somewhere else, not because of a release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.stack import Stack

MODEL_REVISION = "model_revision"
HOST = "host"
ENVIRONMENT_KEYS = ("gpu", "gpu_count", HOST)
# The order a diff is named in: the engine and its release first, then what moves with it.
ORDER = ("engine", "torch", "cuda", "driver", "nccl", MODEL_REVISION, "gpu", "gpu_count",
         "compute_capability", HOST)


def point_stack(
    fingerprint: Mapping[str, Any], *, engine: str | None, host: str | None,
    model_revision: str | None,
) -> dict[str, Any]:
    """A point's stack from its run's fingerprint, the host that ran it and its model's
    revision: the engine's version under the engine's own key."""
    stack = Stack.of(fingerprint, engine=engine)
    out: dict[str, Any] = {}
    for key, value in stack.items():
        out[key] = value
    out[MODEL_REVISION] = model_revision
    out[HOST] = host
    return out


def stack_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{"key", "before", "after"}] for each component that differs (as text: 12.0 == "12.0"),
    the engine's release first."""
    keys = [k for k in ORDER if k in before or k in after]
    keys += sorted(k for k in {*before, *after} if k not in keys)
    diff: list[dict[str, Any]] = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        if old != new and str(old) != str(new):
            diff.append({"key": key, "before": old, "after": new})
    engine_keys = _engine_version_keys(before, after)
    return sorted(diff, key=lambda d: (0 if d["key"] in engine_keys else 1))


def is_environment(diff: list[dict[str, Any]]) -> bool:
    """Whether a diff moved the series to other hardware or another host."""
    return any(d["key"] in ENVIRONMENT_KEYS for d in diff)


def diff_text(diff: list[dict[str, Any]]) -> str:
    """'<engine> 0.5.2 → 0.5.3; torch 2.8.0 → 2.9.0', or '' for none."""
    return "; ".join(f"{_name(d['key'])} {_shown(d['before'])} → {_shown(d['after'])}"
                     for d in diff)


def _engine_version_keys(*stacks: Mapping[str, Any]) -> set[str]:
    """The keys of the engines' versions in these stacks ("engine" names them)."""
    return {"engine", *(str(s.get("engine")) for s in stacks if s.get("engine"))}


def _name(key: str) -> str:
    return {"gpu_count": "GPUs", MODEL_REVISION: "model revision", "gpu": "GPU"}.get(key, key)


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)
