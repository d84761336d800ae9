"""The stack a result depends on, one list for verdicts, memory, compare and the digest.

A fingerprint (docs/contracts.md) holds the host and the versions its engine's interpreter saw; the
engine's own version sits under the engine's `version_key` (config/engines/<name>/engine.yaml).
`Stack` reads one fingerprint (and the record's `engine`, when it names one) into the components
below, in this order, with the engine's version shown under its engine's key, so that a change
reads "<engine> 0.5.2 -> 0.5.3" and a change of engine "engine <one> -> <other>".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.engine_info import all_info, describe, engine_of

# The components, in the order a change is named. "engine" is the engine's name and, beside
# it, its version under the engine's key; the rest are the fingerprint's own keys.
STACK_KEYS = ("gpu", "gpu_count", "compute_capability", "driver", "cuda", "torch", "engine",
              "nccl")
# docs/contracts.md "Memory across batches": a dead end holds on any number of the same GPUs.
MEMORY_KEYS = tuple(k for k in STACK_KEYS if k != "gpu_count")
# docs/contracts.md's verdict rule 3: a run on another gpu, gpu count or stack than its baseline's
# is inconclusive (the compute capability goes with the gpu).
DRIFT_KEYS = tuple(k for k in STACK_KEYS if k != "compute_capability")
# What tells a host type apart (the digest groups its stacks by it).
HOST_TYPE = ("gpu", "compute_capability")
# The fingerprint keys a report shows first, the engines' version keys among them.
FINGERPRINT_KEYS = ("gpu", "gpu_count", "compute_capability", "interconnect", "driver", "cuda",
                    "torch")


def version_keys() -> tuple[str, ...]:
    return tuple(i.version_key for i in all_info() if i.version_key)


def fingerprint_keys() -> tuple[str, ...]:
    return (*FINGERPRINT_KEYS, *version_keys(), "nccl")


@dataclass(frozen=True)
class Stack:
    """One fingerprint's stack: `engine` and its `version`, and the host's components."""

    engine: str
    version: str | None
    parts: tuple[tuple[str, Any], ...]  # (key, value) for every other STACK_KEYS entry

    @classmethod
    def of(cls, fingerprint: Mapping[str, Any], *, engine: str | None = None) -> Stack:
        fp = dict(fingerprint)
        ran = engine_of(fp, named=engine)
        key = describe(ran).version_key
        version = fp.get(key) if key else None
        return cls(engine=ran, version=None if version is None else str(version),
                   parts=tuple((k, fp.get(k)) for k in STACK_KEYS if k != "engine"))

    @property
    def version_key(self) -> str:
        return describe(self.engine).version_key or self.engine

    def items(self, keys: tuple[str, ...] = STACK_KEYS) -> list[tuple[str, Any]]:
        """(key, value) in `keys`' order; "engine" gives the engine's name, then its version
        under its own key."""
        parts = dict(self.parts)
        out: list[tuple[str, Any]] = []
        for key in keys:
            if key == "engine":
                out += [("engine", self.engine), (self.version_key, self.version)]
            else:
                out.append((key, parts.get(key)))
        return out

    def changes(self, other: Stack, keys: tuple[str, ...] = STACK_KEYS,
                ) -> list[tuple[str, Any, Any]]:
        """(key, ours, theirs) for each component that differs (as text: 12.0 == "12.0")."""
        theirs = dict(other.items(keys))
        if self.engine != other.engine:  # the versions of two engines are not one component
            ours = [(k, v) for k, v in self.items(keys) if k != self.version_key]
            theirs.pop(other.version_key, None)
        else:
            ours = self.items(keys)
        return [(k, v, theirs.get(k)) for k, v in ours
                if v != theirs.get(k) and str(v) != str(theirs.get(k))]
