"""A queued collectives probe: `probe` from chat (docs/contracts.md "Evidence for the why").

A probe waits in its queue like a batch (`status` gives its position, `cancel` stops it) and
the worker that takes it measures on its own host, the GPU host: it is a batch whose plan holds
the probe's request (`BatchPlan.probe`) and no configurations. The request was checked where it
was typed for everything but the host; its env is checked again here (no protected variable, no
secret in clear), then the host's part (the backend when none was named, the GPUs for nccl, a
CPU per gloo rank, each `${NAME}` of its env set in the worker's environment), and a request
this host cannot run ends `refused`, nothing started.

Its report, in every ending:
`{"batch", "preset": "probe", "probe": <docs/contracts.md's probe JSON> | null, "request": {...},
"host", "state", "error"?}`.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from typing import Any

from jobs.batches.run_events import phase_emitter
from jobs.core.events import EventSink, make_event
from jobs.core.plans import PROBE, BatchPlan
from jobs.core.probe_text import peak_busbw
from jobs.evidence.collectives import ProbeCancelled, ProbeError, run_probe
from jobs.evidence.probe_input import (
    ProbeInputError,
    ProbeRequest,
    for_this_host,
    parse_env,
    request_of,
)
from jobs.store import BatchRow, Store

Prober = Callable[..., dict[str, Any]]


def probe_plan(request: ProbeRequest, *, queue: str) -> BatchPlan:
    """The plan of a queued probe: the request as asked (the host fills in the rest)."""
    return BatchPlan(
        preset=PROBE, engine=PROBE, queue=queue, metric="busbw_gbps", lower_is_better=False,
        min_effect_pct=0.0, reps=1, startup_s=0.0, bench_s=request.timeout_s, bench={},
        configs=(), warmup=False, probe=dataclasses.asdict(request),
    )


def execute_probe(
    row: BatchRow, *, store: Store, sink: EventSink, should_stop: Callable[[], bool],
    prober: Prober = run_probe,
) -> dict[str, Any]:
    """Measure a queued probe on this host to its end (done, failed, refused or cancelled);
    returns its report, stored with the batch and sent with `batch.finished`."""
    assert row.plan.probe is not None
    host = socket.gethostname()
    asked = request_of(row.plan.probe)
    report = probe_report(row, host=host)
    if should_stop():
        return _end(store, sink, row.id, report, state="cancelled",
                    error="cancelled before it started")
    try:
        parse_env(f"{k}={v}" for k, v in asked.env)  # chat's rules again: a queued message
        request = for_this_host(asked)  # may come from anyone who can reach the broker
    except ProbeInputError as exc:
        return _end(store, sink, row.id, report, state="refused",
                    error=f"this host cannot run the probe: {exc}")
    report["request"] = dataclasses.asdict(request)
    if not store.start(row.id, host=host):
        return report  # cancelled while queued: its canceller said so, nothing runs
    sink.emit(make_event("batch.started", row.id, host=host, queue=row.queue, approaches=[PROBE],
                         reps=1, warmup=False, metric=row.plan.metric, warnings=[],
                         preset=PROBE, sweep=None, confirms=None, probe=report["request"]))
    phase = phase_emitter(sink, row.id, PROBE, 0, 1)
    phase("probe", {"world": request.world, "backend": request.backend,
                    "sizes": len(request.sizes)})
    try:
        report["probe"] = prober(request, should_stop=should_stop)
    except ProbeCancelled as exc:
        return _end(store, sink, row.id, report, state="cancelled", error=str(exc))
    except ProbeError as exc:
        return _end(store, sink, row.id, report, state="failed", error=str(exc))
    return _end(store, sink, row.id, report, state="done")


def probe_report(row: BatchRow, *, host: str | None) -> dict[str, Any]:
    """A probe's report before it measured (queued, or ended without measuring)."""
    return {"batch": row.id, "preset": PROBE, "probe": None, "request": row.plan.probe,
            "host": host, "state": row.state}


def _end(store: Store, sink: EventSink, batch_id: str, report: dict[str, Any], *, state: str,
         error: str | None = None) -> dict[str, Any]:
    report = {**report, "state": state, **({} if error is None else {"error": error})}
    if not store.end(batch_id, state, report=report, host=report["host"],
                     error=None if error is None else error[:500]):
        return {}  # ended meanwhile (cancelled while queued): its ender's report and messages
    if report["probe"] is not None or state != "refused":  # its progress row ends too
        sink.emit(make_event(
            "approach.finished", batch_id, approach=PROBE, index=1, of=1,
            status="ok" if state == "done" else state, verdict=None, delta_pct=None, cause=None,
            why=error or "", metric="busbw_gbps", value=peak_busbw(report["probe"] or {})))
    kind = "batch.cancelled" if state == "cancelled" else "batch.finished"
    sink.emit(make_event(kind, batch_id, state=state, report=report,
                         **({} if error is None else {"error": error[:500]})))
    return report
