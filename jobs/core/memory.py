"""Known dead ends (SPEC.md "Memory across batches"): what failed for a reason that will not go
away by itself is not started again on the same stack.

A configuration is its resolved `server_args` and `env` (`config_key`); a stack is the parts of
a host's fingerprint a failure can depend on (`stack_key`: jobs.core.stack's MEMORY_KEYS: gpu,
compute capability, driver, CUDA, torch, the engine and its version, NCCL). An earlier failed
record of the same configuration whose cause is deterministic (`arch-unsupported`,
`bad-config`) is a dead end on its stack: on that stack the approach is not started, its record
copied (`dead_end_record`); on any other stack it is tried again, and its verdict says it failed
before and on what (`reopened_note`). Out-of-memory, timeouts, crashes and NCCL errors are
never remembered: they may pass on a second try. Nor is a run that measured at least one load
level before it failed at a higher one (`reached_a_level`): the configuration works, up to a
load; its verdict (improved, regressed or mixed, level by level) says where it stops.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from jobs.core.records import RunRecord
from jobs.core.stack import MEMORY_KEYS, Stack
from jobs.settings import is_secret_name

DETERMINISTIC = frozenset({"arch-unsupported", "bad-config"})


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def config_key(server_args: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The configuration's identity. A secret-named variable is left out: records keep its
    value masked, so it could never match (and a token is not what makes a server fail)."""
    kept = {k: v for k, v in env.items() if not is_secret_name(k)}
    return _digest({"server_args": dict(server_args), "env": kept})


def stack_of(fingerprint: Mapping[str, Any], *, engine: str | None = None) -> dict[str, Any]:
    return dict(Stack.of(fingerprint, engine=engine).items(MEMORY_KEYS))


def stack_key(fingerprint: Mapping[str, Any], *, engine: str | None = None) -> str:
    return _digest(stack_of(fingerprint, engine=engine))


def stack_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for every stack component that differs."""
    return Stack.of(old).changes(Stack.of(new), MEMORY_KEYS)


def reached_a_level(record: RunRecord) -> bool:
    """Whether a run measured at some load level (DESIGN23 record shape): a run that failed
    above it is no dead end, whatever its cause."""
    return any(level.get("status", "ok") == "ok"
               and any(isinstance(v, list) and v for v in (level.get("metrics") or {}).values())
               for level in record.by_load)


def known_from(record: RunRecord) -> str | None:
    """The batch whose failure this record repeats without running, or None."""
    value = record.extra.get("known_from")
    return value if isinstance(value, str) and value else None


def dead_end_record(earlier: RunRecord, *, now: RunRecord) -> RunRecord:
    """`now` (the configuration, not started) as SPEC.md lays out a known dead end: failed, the
    earlier exit code and log tail, and `known_from`."""
    return dataclasses.replace(
        now, status="failed", exit_code=earlier.exit_code, log_tail=earlier.log_tail,
        metrics={k: ([] if isinstance(v, list) else None) for k, v in now.metrics.items()},
        extra={**now.extra, "known_from": known_from(earlier) or earlier.batch},  # the origin
    )


def reopened_note(earlier: RunRecord, cause: str, *, fingerprint: Mapping[str, Any]) -> str:
    """What the report says of a dead end the stack's change re-opened."""
    changed = ", ".join(f"{k} {a} → {b}" for k, a, b in
                        stack_changes(earlier.fingerprint, fingerprint))
    return (f"it failed before ({cause}, batch {earlier.batch}); tried again since the stack "
            f"changed: {changed or 'unknown'}")
