"""Known dead ends (docs/contracts.md "Memory across batches"): what failed for a reason that will
not go away by itself is not started again while nothing that made it fail has changed.

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

A failure of the benchmark (the server was up; its client, or the client's settings, failed:
the record's `"failed_in": "bench"`) is never a dead end of the server configuration: its key
adds the bench settings it ran with (`bench_key`), so it holds only while they are the same,
and another preset with other bench settings runs the configuration as if it never failed.
A dead end's verdict says what re-opens it (`reopened_by`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.core.stack import MEMORY_KEYS, Stack
from jobs.redaction import is_secret_name

DETERMINISTIC = frozenset({"arch-unsupported", "bad-config"})
IN_BENCH = "bench"  # a record's `failed_in` when its benchmark failed on a server that was up
# Records stored before `failed_in` (read by the store's migration 0009): a served engine's own
# line when its benchmark process failed (jobs.engines.served), and an argparse refusal that
# names a flag, which is the benchmark's when the flag is one of the bench settings.
_BENCH_LINE = re.compile(r"^specbench: .+ \((?:warm-up|repetition \d+)\) (?:exited|timed out)",
                         re.MULTILINE)
_STACK_NAMES = {"gpu": "GPU", "compute_capability": "compute capability", "cuda": "CUDA",
                "nccl": "NCCL"}
_NAMED_FLAG = re.compile(r": error: (?:argument |unrecognized arguments: )--([\w.-]+)")


@dataclass(frozen=True)
class PastRun:
    """An earlier run as the store keeps it: its record, and its `bench_key` when its benchmark
    failed (the failure then holds only for those bench settings)."""

    record: RunRecord
    bench_key: str | None = None

    @property
    def in_bench(self) -> bool:
        return self.bench_key is not None


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def config_key(server_args: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The configuration's identity. A secret-named variable is left out: records keep its
    value masked, so it could never match (and a token is not what makes a server fail)."""
    kept = {k: v for k, v in env.items() if not is_secret_name(k)}
    return _digest({"server_args": dict(server_args), "env": kept})


def bench_settings(plan: BatchPlan) -> dict[str, Any]:
    """What a configuration's benchmark is given: the plan's bench, and its load levels."""
    return {**plan.bench, **(plan.loads or {})}


def bench_key(settings: Mapping[str, Any]) -> str:
    """The bench settings' part of a dead end's key, for a failure of the benchmark."""
    return _digest({"bench": dict(settings)})


def bench_failure(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a record of a failed benchmark adds: where it failed, with what settings."""
    return {"failed_in": IN_BENCH, "bench": dict(settings)}


def failed_in_bench(record: RunRecord) -> bool:
    return record.extra.get("failed_in") == IN_BENCH


def is_bench_failure(*, log_tail: str, bench: Mapping[str, Any]) -> bool:
    """Whether a record stored before `failed_in` failed in its benchmark, from its log tail
    and its batch's bench settings (the store's migration 0009 keys those runs by them)."""
    if _BENCH_LINE.search(log_tail):
        return True
    return any(flag.replace("_", "-") in bench for flag in _NAMED_FLAG.findall(log_tail))


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
    """`now` (the configuration, not started) as docs/contracts.md lays out a known dead end:
    failed, the earlier exit code and log tail, and `known_from`; a failure of the benchmark
    keeps its `failed_in` and bench settings, so that it stays keyed by them."""
    bench: dict[str, Any] = {k: earlier.extra[k] for k in ("failed_in", "bench")
                             if k in earlier.extra} if failed_in_bench(earlier) else {}
    return dataclasses.replace(
        now, status="failed", exit_code=earlier.exit_code, log_tail=earlier.log_tail,
        metrics={k: ([] if isinstance(v, list) else None) for k, v in now.metrics.items()},
        extra={**now.extra, **bench,
               "known_from": known_from(earlier) or earlier.batch},  # the origin
    )


def reopened_by(record: RunRecord) -> str:
    """What re-opens a known dead end: a change of anything its key holds."""
    parts = "its bench settings, server args or env" if failed_in_bench(record) \
        else "its server args or env"
    engine = Stack.of(record.fingerprint, engine=record.engine).engine
    names = ", ".join(_STACK_NAMES.get(key, key) for key in MEMORY_KEYS if key != "engine")
    return (f"re-opened by a change of {parts}, or of the stack ({names}, the engine "
            f"{engine} and its version)")


def reopened_note(earlier: RunRecord, cause: str, *, fingerprint: Mapping[str, Any]) -> str:
    """What the report says of a dead end the stack's change re-opened."""
    changed = ", ".join(f"{k} {a} → {b}" for k, a, b in
                        stack_changes(earlier.fingerprint, fingerprint))
    return (f"it failed before ({cause}, batch {earlier.batch}); tried again since the stack "
            f"changed: {changed or 'unknown'}")
