"""`history`: the last batches a person started, newest first, one summary line each. A sweep
and its confirmation are one experiment (docs/contracts.md): one line, the sweep's, with the
confirmation's verdict."""

from __future__ import annotations

from typing import Any

from jobs.commands.context import Context
from jobs.store import BatchRow
from jobs.store.experiments import recent_experiments

HISTORY_ROWS = 10


def history(ctx: Context, *, rows: int = HISTORY_ROWS) -> list[dict[str, Any]]:
    return [_summary_line(r) for r in recent_experiments(ctx.store, limit=rows)]


def _summary_line(row: BatchRow) -> dict[str, Any]:
    report = row.report or {}
    sweep = report.get("sweep") or None
    return {
        "batch": row.id, "preset": row.preset, "state": row.state, "by": row.requested_by,
        "when": row.created_at.strftime("%Y-%m-%d %H:%M"),
        "counts": report.get("counts") or {}, "best": report.get("key_achievement"),
        "probe": None if row.plan.probe is None else _probe_words(report or None, row.plan.probe),
        "sweep": None if sweep is None else {
            "name": sweep.get("name"), "best": sweep.get("best"),
            "confirmation": sweep.get("confirmation")},
    }


def _probe_words(report: dict[str, Any] | None, request: dict[str, Any]) -> str:
    """A probe's line: what it measured, or what it was asked."""
    from jobs.core.probe_text import asked_text, peak_busbw

    measured = None if report is None else report.get("probe")
    if not measured:
        return asked_text(request)
    return (f"all_reduce over {measured['world']} ranks ({measured['backend']}), busbw up to "
            f"{peak_busbw(measured):.3f} GB/s")
