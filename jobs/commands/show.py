"""`show [BATCH]`: a stored batch (by default the latest a person started: after a sweep, the
sweep batch, its confirmation folded in), its report and its run records, and its chart
(`chart_of`), and the charts beside it (`extra_charts_of`: with load levels the metric against
load and its Pareto front, for a sweep its landscape and Pareto front).

The report is the one stored when the batch ended (what its thread was told); a batch still
running, or cut short, gets one built from the records so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.batches import runners, sweeping
from jobs.batches.execution import build_report, log_path
from jobs.batches.probing import probe_report
from jobs.commands.context import Context
from jobs.core.records import RunRecord
from jobs.errors import UserError, did_you_mean
from jobs.store import BatchRow, Store
from jobs.store.experiments import confirmation_of, latest_experiment

if TYPE_CHECKING:
    from jobs.charts.files import ChartFile


@dataclass(frozen=True)
class Shown:
    row: BatchRow
    records: list[RunRecord]
    report: dict[str, Any] | None  # None only when asked for records alone

    @property
    def secrets(self) -> dict[str, str]:
        """The batch's env values whose names say they are secret (to mask on display)."""
        from jobs.redaction import is_secret_name

        return {k: v for c in self.row.plan.configs for k, v in c.env.items()
                if is_secret_name(k)}


def show(ctx: Context, batch: str | None = None, *, records_only: bool = False) -> Shown:
    runners.settle(ctx.store)  # a batch whose runner died ends first, with its reason
    row = ctx.batch(batch) if batch else latest_experiment(ctx.store)
    if row is None:
        raise UserError("no batch stored yet")
    records = ctx.store.records(row.id)
    if records_only:
        return Shown(row=row, records=records, report=None)
    return Shown(row=row, records=records, report=report_of(row, records, store=ctx.store))


@dataclass(frozen=True)
class ServerLog:
    """One configuration's server log: the whole file where this host has it (the batch ran
    here), else the last lines its run record keeps, and where the whole file is."""

    batch: str
    approach: str
    path: str  # where the worker wrote it, under its data dir
    host: str | None  # the host that ran the batch
    text: str
    whole: bool


def server_log(ctx: Context, batch: str | None, approach: str) -> ServerLog:
    """`show [BATCH] --logs APPROACH`: the approach's server log (a remedy's "read the full
    server log" points here)."""
    row = ctx.batch(batch) if batch else latest_experiment(ctx.store)
    if row is None:
        raise UserError("no batch stored yet")
    records = {r.approach: r for r in ctx.store.records(row.id)}
    record = records.get(approach)
    if record is None:
        known = ", ".join(records) or "none yet"
        raise UserError(f"batch {row.id} has no run of {approach!r}"
                        f"{did_you_mean(approach, list(records))}; its runs: {known}")
    path = log_path(row.id, approach)
    try:
        return ServerLog(batch=row.id, approach=approach, path=str(path), host=row.host,
                         text=path.read_text(encoding="utf-8", errors="replace"), whole=True)
    except OSError:  # on another host (the worker's), or removed by the retention
        return ServerLog(batch=row.id, approach=approach, path=str(path), host=row.host,
                         text=record.log_tail, whole=False)


def chart_of(data: Shown) -> bytes:
    """The batch's chart (PNG): its report's verdicts over its records."""
    from jobs.charts.summary import to_chart_png

    report = data.report if data.report is not None else report_of(data.row, data.records)
    png = to_chart_png(report, data.records)
    if png is None:
        raise UserError(f"no chart: nothing was measured in batch {data.row.id}")
    return png


def extra_charts_of(data: Shown) -> list[ChartFile]:
    """The charts beside the batch's: with load levels its metric against load and its Pareto
    front, for a sweep its landscape and Pareto front; else []."""
    from jobs.charts.files import extra_charts

    report = data.report if data.report is not None else report_of(data.row, data.records)
    return extra_charts(report, data.records, plan=data.row.plan)


def report_of(
    row: BatchRow, records: list[RunRecord], *, store: Store | None = None
) -> dict[str, Any]:
    """The batch's stored report, or one built from its records so far; a confirmation's names
    its sweep (`confirms`), and a sweep's still running shows its points and, with `store`, its
    confirmation as it stands (one experiment, docs/contracts.md)."""
    if row.plan.is_probe:  # a queued probe: its report, or where it stands
        return row.report or probe_report(row, host=row.host)
    if row.plan.bisect is not None:  # a bisection: its report, or where it stands
        return row.report or {"batch": row.id, "preset": row.preset, "engine": row.engine,
                              "metric": row.plan.metric, "state": row.state,
                              "bisect": {**row.plan.bisect, "metric": row.plan.metric,
                                         "measured": [], "text": f"{row.state}: not done yet"}}
    if row.report is not None:
        if row.plan.confirms is not None and "confirms" not in row.report:
            return {**row.report, "confirms": row.plan.confirms}  # stored before the key
        return row.report
    if not any(r.role == "baseline" for r in records):
        raise UserError(f"batch {row.id} ({row.state}) has no baseline record yet")
    report = build_report(records, row.plan)
    report["state"] = row.state
    if row.plan.confirms is not None:
        report["confirms"] = row.plan.confirms
    if row.plan.sweep is not None:
        confirming = None if store is None else confirmation_of(store, row.id)
        report = sweeping.add_running(report, row.plan, records, confirming=confirming)
    return report


def stored_report(store: Store, row: BatchRow) -> dict[str, Any]:
    return report_of(row, store.records(row.id), store=store)
