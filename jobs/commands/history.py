"""`history`: the last batches, newest first, one summary line each."""

from __future__ import annotations

from typing import Any

from jobs.commands.context import Context
from jobs.store import BatchRow

HISTORY_ROWS = 10


def history(ctx: Context, *, rows: int = HISTORY_ROWS) -> list[dict[str, Any]]:
    return [_summary_line(r) for r in reversed(ctx.store.list_batches()[-rows:])]


def _summary_line(row: BatchRow) -> dict[str, Any]:
    report = row.report or {}
    return {
        "batch": row.id, "preset": row.preset, "state": row.state, "by": row.requested_by,
        "when": row.created_at.strftime("%Y-%m-%d %H:%M"),
        "counts": report.get("counts") or {}, "best": report.get("key_achievement"),
    }
