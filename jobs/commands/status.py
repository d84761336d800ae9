"""`status`: running and queued batches per queue, with positions, estimates and live workers.

`eta_s` is null when the preset has no history to estimate from; `overdue_s` is set when the
configuration running now (or one a queued batch waits behind) is past its estimate, and then
`eta_s` counts only what comes after it. A sweep's confirmation is no line of its own: its sweep's
line says `confirming` (docs/contracts.md: one experiment)."""

from __future__ import annotations

from typing import Any

from jobs import settings
from jobs.batches import runners
from jobs.batches.dispatch import QueueEntry, queue_entries
from jobs.commands.context import Context
from jobs.store import ACTIVE_STATES, BatchRow


def status(ctx: Context) -> dict[str, Any]:
    """`{"mode": "embedded"|"distributed", "queues": [...]}`; live workers are counted from
    the broker's heartbeats in distributed mode and unknown (None) in embedded mode; `ended`:
    the batches this call found with a dead runner and ended (`runners.settle`), and why."""
    store = ctx.store
    ended = [{"batch": e.batch, "state": e.state, "reason": e.reason}
             for e in runners.settle(store)]
    active = store.list_batches(states=ACTIVE_STATES)
    # a sweep's confirmation runs inside its sweep batch: one experiment, shown on its line
    confirming = {r.plan.confirms: r for r in active if r.plan.confirms is not None}
    entries = queue_entries(store, [r for r in active if r.plan.confirms is None])
    distributed = settings.broker_url() is not None
    queues = [
        {"queue": name,
         "live_workers": ctx.dispatcher.live_workers(name) if distributed else None,
         "batches": [_entry(e, confirming.get(e.batch.id)) for e in members]}
        for name, members in sorted(entries.items())
    ]
    return {"mode": "distributed" if distributed else "embedded", "queues": queues,
            "ended": ended}


def _entry(entry: QueueEntry, confirmation: BatchRow | None) -> dict[str, Any]:
    row = entry.batch
    return {
        "confirming": None if confirmation is None else {
            "batch": confirmation.id, "state": confirmation.state},
        "batch": row.id, "preset": row.preset, "state": row.state, "position": entry.position,
        "eta_s": None if entry.eta_s is None else round(entry.eta_s, 1),
        "overdue_s": None if entry.overdue_s is None else round(entry.overdue_s, 1),
        "requested_by": row.requested_by, "host": row.host,
        "created_at": row.created_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
    }
