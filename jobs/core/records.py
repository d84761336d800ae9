"""Run records: one JSON object per configuration run (docs/contracts.md's format), read and
written.

A file of records (`decode_lines`, `parse_lines`) is hostile until read: each problem is one
RecordError naming the line (not UTF-8, UTF-16, nested too deep, a lone surrogate, NaN or
Infinity, a negative or absurd metric, an approach twice in one batch), never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobs.core.json_lines import MAX_DEPTH as MAX_DEPTH  # read here by the analysis and tests
from jobs.core.json_lines import decode_json, short
from jobs.core.json_lines import decode_lines as decode_lines
from jobs.errors import RecordError

STATUSES = ("ok", "failed", "timeout", "cancelled", "skipped")
CAPACITY = "capacity"  # the record's capacity under the SLO, a judged key like a metric
ROLES = ("baseline", "approach")
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
    engine: str | None = None  # the engine that ran it; None in records written before

    @property
    def warmup(self) -> dict[str, Any] | None:
        """The warm-up pass's figures (the engine's `warmup` key): recorded, never a sample, so
        no verdict, range or median reads them; None when the run had none."""
        value = self.extra.get("warmup")
        return value if isinstance(value, dict) else None

    @property
    def by_load(self) -> list[dict[str, Any]]:
        """The run at each load level, lowest first (docs/contracts.md): `{"load": {knob: level},
        "metrics": {...}}`, with `status` where the level did not end `ok`; [] for a run of a
        batch without loads. The view of one level as a record is `at_level`."""
        levels = self.extra.get("by_load")
        if not isinstance(levels, list):
            return []
        return [level for level in levels
                if isinstance(level, dict) and isinstance(level.get("load"), dict)]

    def at_level(self, index: int) -> RunRecord:
        """This run as one level saw it: the level's metrics and status (its own `warmup`,
        `repetitions`), everything else the record's; the record itself without loads."""
        levels = self.by_load
        if not levels:
            return self
        level = levels[index]
        extra = {k: v for k, v in self.extra.items()
                 if k not in ("by_load", "warmup", "repetitions", "stopped_early")}
        extra.update({k: level[k] for k in ("warmup", "repetitions", "stopped_early")
                      if k in level})
        bracket = self.extra.get("bracket")  # the baseline's closing run, at the same level
        if isinstance(bracket, dict) and isinstance(bracket.get("by_load"), list):
            closing = bracket["by_load"]
            at = closing[index] if index < len(closing) and isinstance(closing[index],
                                                                       dict) else {}
            extra["bracket"] = {**{k: v for k, v in bracket.items() if k != "by_load"},
                                "metrics": at.get("metrics") or {},
                                "status": at.get("status", bracket.get("status", "ok"))}
        metrics = level.get("metrics")
        status = level.get("status")
        return dataclasses.replace(
            self, metrics=dict(metrics) if isinstance(metrics, dict) else {},
            status=status if status in STATUSES else "ok", extra=extra)

    @property
    def accept_length(self) -> float | None:
        value = self.metrics.get("accept_length")
        return float(value) if isinstance(value, int | float) else None

    def samples(self, metric: str) -> list[float]:
        """The metric's values, one per repetition (bad entries, NaN and infinities dropped).
        `capacity` (docs/contracts.md "Capacity under the SLO") is the record's capacity: one
        value, none when the search found none (or the batch searched for none)."""
        values = self.metrics.get(metric)
        if metric == CAPACITY and not values:
            found = self.extra.get(CAPACITY)
            values = found.get("value") if isinstance(found, dict) else None
        if not isinstance(values, list):
            values = [values]
        return [float(v) for v in values if is_number(v) and math.isfinite(v)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _KNOWN}
        if self.engine is not None:
            out["engine"] = self.engine
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
            f"{where}: 'role' must be one of {', '.join(ROLES)}, not {short(data['role'])}"
        )
    if data["status"] not in STATUSES:
        raise RecordError(
            f"{where}: 'status' must be one of {', '.join(STATUSES)}, not {short(data['status'])}"
        )
    for key in ("change", "server_args", "env", "metrics", "fingerprint"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise RecordError(f"{where}: '{key}' must be an object")
    change = data.get("change") or {}
    for key in ("server_args", "env"):
        if change.get(key) is not None and not isinstance(change[key], dict):
            raise RecordError(f"{where}: 'change.{key}' must be an object")
    for key in ("parent", "started_at", "finished_at", "engine"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise RecordError(f"{where}: '{key}' must be a string or null")
    fallbacks = data.get("fallbacks")  # the engine's fallback lines (jobs.core.rules)
    if fallbacks is not None and not (
        isinstance(fallbacks, list) and all(isinstance(x, str) for x in fallbacks)
    ):
        raise RecordError(f"{where}: 'fallbacks' must be a list of strings")
    warmup = data.get("warmup")  # the warm-up pass before the repetitions, or null
    if data.get("bracket") is not None and not (  # the baseline's closing run
            isinstance(data["bracket"], dict) and isinstance(data["bracket"].get("metrics", {}),
                                                              dict)):
        raise RecordError(f"{where}: 'bracket' must be an object with 'metrics' or null")
    starts = data.get("starts")  # each server start's own metrics
    if starts is not None and not (isinstance(starts, list)
                                   and all(isinstance(s, dict) for s in starts)):
        raise RecordError(f"{where}: 'starts' must be a list of objects")
    if warmup is not None and not isinstance(warmup, dict):
        raise RecordError(f"{where}: 'warmup' must be an object or null")
    exit_code = data.get("exit_code")
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
        raise RecordError(f"{where}: 'exit_code' must be a whole number or null")
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
        exit_code=exit_code,
        log_tail=str(data.get("log_tail") or ""),
        metrics=dict(data.get("metrics") or {}),
        fingerprint=dict(data.get("fingerprint") or {}),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
        extra={k: v for k, v in data.items() if k not in (*_KNOWN, "engine")},
        engine=data.get("engine") or None,
    )


# --------------------------------------------------------------------------- a file of records

MAX_METRIC = 1e15  # no throughput, latency, count or length comes near; sums stay finite


def parse_lines(lines: Iterable[str], *, source: str = "RUNS.jsonl") -> Iterator[RunRecord]:
    """Records from JSON lines; a malformed line raises RecordError naming the line number."""
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        record = to_record(decode_json(line, where=where), where=where)
        _check_metrics(record, where=where)
        first = seen.setdefault((record.batch, record.approach), number)
        if first != number:
            raise RecordError(
                f"{where}: approach {short(record.approach)} appears twice in batch "
                f"{short(record.batch)} (first at line {first})"
            )
        yield record


def _check_metrics(record: RunRecord, *, where: str) -> None:
    """Every measured number is a rate, a time, a count or a length: never below 0."""
    measured = [("metrics", name, values) for name, values in record.metrics.items()]
    measured += [("warmup", name, value) for name, value in (record.warmup or {}).items()]
    bracket = record.extra.get("bracket")
    if isinstance(bracket, dict) and isinstance(bracket.get("metrics"), dict):
        measured += [("bracket.metrics", name, values)
                     for name, values in bracket["metrics"].items()]
    for where_in, name, values in measured:
        for value in values if isinstance(values, list) else [values]:
            if is_number(value) and not 0 <= value <= MAX_METRIC:
                shown = name if name.isprintable() and len(name) <= 40 else short(name, 40)
                raise RecordError(
                    f"{where}: {where_in}.{shown} holds {value:g}: a measurement is "
                    f"between 0 and {MAX_METRIC:g}"
                )


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def to_jsonl(records: Iterable[RunRecord]) -> str:
    return "".join(record.to_json() + "\n" for record in records)
