"""Run records: one JSON object per configuration run (SPEC.md's format), read and written."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobs.core.errors import RecordError

STATUSES = ("ok", "failed", "timeout", "cancelled", "skipped")
ROLES = ("baseline", "approach")
FINGERPRINT_KEYS = (
    "gpu", "gpu_count", "compute_capability", "interconnect", "driver", "cuda", "torch",
    "sglang", "nccl",
)
_KNOWN = (
    "batch", "preset", "approach", "role", "parent", "hypothesis", "change", "server_args",
    "env", "status", "exit_code", "log_tail", "metrics", "fingerprint", "started_at",
    "finished_at",
)


@dataclass(frozen=True)
class RunRecord:
    """One configuration's run. `extra` keeps unknown keys so that they round-trip."""

    batch: str
    preset: str
    approach: str
    role: str
    status: str
    parent: str | None = None
    hypothesis: str = ""
    change: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"server_args": {}, "env": {}}
    )
    server_args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    log_tail: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accept_length(self) -> float | None:
        value = self.metrics.get("accept_length")
        return float(value) if isinstance(value, int | float) else None

    def samples(self, metric: str) -> list[float]:
        """The metric's values, one per repetition (bad entries dropped)."""
        values = self.metrics.get(metric)
        if isinstance(values, int | float) and not isinstance(values, bool):
            return [float(values)]
        if not isinstance(values, list):
            return []
        return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _KNOWN}
        out.update(self.extra)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)


def to_record(data: Any, *, where: str = "record") -> RunRecord:
    """Validate one decoded JSON object as a run record; errors name `where` and the key."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a run record must be a JSON object")
    for key in ("batch", "preset", "approach", "role", "status"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise RecordError(f"{where}: '{key}' is missing or not a string")
    if data["role"] not in ROLES:
        raise RecordError(
            f"{where}: 'role' must be one of {', '.join(ROLES)}, not {data['role']!r}"
        )
    if data["status"] not in STATUSES:
        raise RecordError(
            f"{where}: 'status' must be one of {', '.join(STATUSES)}, not {data['status']!r}"
        )
    for key in ("change", "server_args", "env", "metrics", "fingerprint"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise RecordError(f"{where}: '{key}' must be an object")
    change = data.get("change") or {}
    return RunRecord(
        batch=data["batch"],
        preset=data["preset"],
        approach=data["approach"],
        role=data["role"],
        status=data["status"],
        parent=data.get("parent") or None,
        hypothesis=str(data.get("hypothesis") or ""),
        change={
            "server_args": dict(change.get("server_args") or {}),
            "env": dict(change.get("env") or {}),
        },
        server_args=dict(data.get("server_args") or {}),
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        exit_code=data.get("exit_code"),
        log_tail=str(data.get("log_tail") or ""),
        metrics=dict(data.get("metrics") or {}),
        fingerprint=dict(data.get("fingerprint") or {}),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


def parse_lines(lines: Iterable[str], *, source: str = "RUNS.jsonl") -> Iterator[RunRecord]:
    """Records from JSON lines; a malformed line raises RecordError naming the line number."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{source}:{number}: not valid JSON ({exc.msg})") from None
        yield to_record(data, where=f"{source}:{number}")


def to_jsonl(records: Iterable[RunRecord]) -> str:
    return "".join(record.to_json() + "\n" for record in records)
