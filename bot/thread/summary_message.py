"""The end of a batch's thread: the summary reply with its buttons, its uploads (the chart and
the run records), and what the summary's Show-logs button answers."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from bot.thread.messages import Message, Upload
from jobs import redaction
from jobs.charts.files import extra_charts
from jobs.charts.summary import to_chart_png
from jobs.core.messages import (
    environment,
    fit_blocks,
    is_bisect_report,
    is_probe_report,
    render_report,
    render_text,
    summary_payload,
)
from jobs.core.plans import BatchPlan
from jobs.core.records import RunRecord
from jobs.core.units import unit_of
from jobs.extras import lacking

LOG_LINES = 40
log = logging.getLogger(__name__)


def summary_message(report: dict[str, Any], *, batch_id: str) -> Message:
    """The summary (not yet scrubbed of secrets), with Retry and Show-logs buttons when some
    approaches failed or were inconclusive."""
    payload = summary_payload(report)
    results = report.get("results", [])
    inconclusive = [r["approach"] for r in results if r.get("verdict") == "inconclusive"]
    failed = [r["approach"] for r in results if r.get("verdict") == "failed"]
    blocks = fit_blocks(payload["blocks"])
    if inconclusive or failed:
        raw = environment().get_template("batch_summary_actions.slack.j2").render(
            batch=batch_id, inconclusive=inconclusive, failed=failed)
        blocks = blocks[: 49] + json.loads(raw)
    return Message(text=render_report(report, "text"), blocks=blocks, fallback=payload["text"])


def summary_uploads(
    records: list[RunRecord], *, report: dict[str, Any], batch_id: str, plan: BatchPlan,
    redact: Callable[[str], str],
) -> list[Upload]:
    """The chart of the report's verdicts (when something was measured), with load levels the
    metric against load and the Pareto front, for a sweep its landscape and Pareto front, and
    the run records as JSON lines, redacted."""
    files: list[Upload] = []
    if is_probe_report(report):  # a queued probe: its JSON, as `specbench probe --format json`
        probe = report.get("probe")
        return [] if probe is None else [Upload(
            f"{batch_id}-probe.json", (json.dumps(probe, indent=2) + "\n").encode(),
            f"all_reduce probe of {batch_id}")]
    if is_bisect_report(report):  # its batches have their own threads' records and charts
        return []
    charts = _can_draw()
    png = to_chart_png(report, records) if charts else None
    if png is not None:
        unit = unit_of(plan.metric)
        metric = f"{plan.metric} ({unit})" if unit else plan.metric
        files.append(Upload(f"{batch_id}-chart.png", png,
                            f"{metric}: each approach against the baseline, coloured by its "
                            "verdict"))
    files.extend(Upload(f"{batch_id}-{chart.suffix}.png", chart.png, chart.title)
                 for chart in (extra_charts(report, records, plan=plan) if charts else ()))
    lines = [redact(json.dumps(_shown(r))) for r in records]
    files.append(Upload(f"{batch_id}-runs.jsonl", ("\n".join(lines) + "\n").encode(),
                        f"run records of {batch_id}"))
    return files


def _shown(record: RunRecord) -> dict[str, Any]:
    """A run record as it may be uploaded: secret env values read ***, the log redacted."""
    data = record.to_dict()
    data["env"] = redaction.redact_env(dict(record.env))
    data["log_tail"] = redaction.redact(
        record.log_tail, secrets=redaction.secret_values(os.environ, record.env))
    return data


def logs_message(*, store: Any, batch_id: str) -> Message:
    """The failed approaches' log tails (the Show-logs button), redacted."""
    records = store.records(batch_id)
    secrets = redaction.secret_values(os.environ, *(r.env for r in records))
    logs = []
    for r in records:
        if r.status in ("failed", "timeout"):
            lines = redaction.redact(r.log_tail, secrets=secrets).splitlines()[-LOG_LINES:]
            tail = "\n".join(lines)[-2800:].replace("```", "'''")
            logs.append({"approach": r.approach, "status": r.status, "cause": None,
                         "lines": len(lines), "tail": tail})
    text = render_text("batch_logs", batch=batch_id, logs=logs)
    return Message(text=redaction.redact(text, secrets=secrets))


def _can_draw() -> bool:
    """Whether this bot has matplotlib: without it the thread gets its run records and no
    charts, and the log says which extra draws them (jobs.extras)."""
    missing = lacking("charts")
    if missing:
        log.warning("no charts in this thread: they need %s, which this installation lacks: "
                    "pip install 'specbench[charts]'", ", ".join(missing))
    return not missing
