"""Views: a command's data rendered with the shared templates, for every surface alike.

The CLI prints these strings, the console and Slack post them; none of them formats a
command's answer on its own.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from jobs.commands.cancel import Cancelled
from jobs.commands.digest import Digest
from jobs.commands.run import Started
from jobs.commands.show import Shown
from jobs.commands.watch import Added, WatchShown
from jobs.commands.watch_run import Acked
from jobs.core.messages import (
    name_width,
    render_blocks,
    render_report,
    render_text,
    summary_payload,
)
from jobs.core.plans import BatchRow, Preset
from jobs.core.probe_text import asked_text as probe_asked
from jobs.core.watch import (
    Change,
    WatchRow,
    describe_schedule,
    describe_sets,
    diff_text,
    headline,
    outcome_text,
)
from jobs.redaction import redact, secret_values
from jobs.store import TERMINAL_STATES


def started(data: Started) -> str:
    row = data.submitted.batch
    verb = "queued" if data.submitted.created else "already submitted"
    position = data.submitted.position
    text = f"batch {row.id} ({row.preset}) {verb}, position {position} on {row.queue}"
    if data.plan.probe is not None:
        text += f": {probe_asked(data.plan.probe)}"
    if data.plan.bisect is not None:  # docs/contracts.md "Stacks"
        asked = data.plan.bisect
        text += (f": bisecting {asked['approach']} from stack {asked['from']} to "
                 f"{asked['to']}")
    elif data.plan.against is not None:
        current = data.plan.stack or "the current stack"
        text += f": an upgrade check, every configuration on {current} and on {data.plan.against}"
    elif data.plan.stack is not None:
        text += f", on stack {data.plan.stack}"
    if data.added:
        text += (f"; with {', '.join(data.added)}, which the retried approaches extend, so "
                 "each is judged against its parent again")
    return text


def status(data: dict[str, Any], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    ended = "".join(f"batch {e['batch']} ended {e['state']}: {e['reason']}\n"
                    for e in data.get("ended", ()))
    return ended + render_text("status", queues=data["queues"])


def shown(data: Shown, fmt: str = "text") -> str:
    """The report in `fmt` (text, json, slack), env secrets of the batch masked. A batch not
    yet ended says so first, and its key achievement is marked provisional (text, slack)."""
    assert data.report is not None
    text = render_report(data.report, fmt, running=running(data))
    return redact(text, secrets=secret_values(os.environ, data.secrets))


def shown_blocks(data: Shown) -> list[dict[str, Any]]:
    assert data.report is not None
    blocks = summary_payload(data.report, running=running(data))["blocks"]
    secrets = secret_values(os.environ, data.secrets)
    masked: list[dict[str, Any]] = json.loads(redact(json.dumps(blocks), secrets=secrets))
    return masked


def running(data: Shown) -> dict[str, Any] | None:
    """A batch not yet ended (its report built from the records so far): its state and how many
    of its runs are done, for the summary's templates; else None. A sweep's runs are its
    configurations and the points its budget allows."""
    row = data.row
    if row.state in TERMINAL_STATES or row.plan.is_probe:  # a probe's report says its state
        return None
    plan = row.plan
    planned = len(plan.configs) + (plan.sweep.max_servers if plan.sweep is not None else 0)
    done = min(len({r.approach for r in data.records}), planned)
    return {"state": row.state, "done": done, "planned": planned}


def cancelled(data: Cancelled) -> str:
    row = data.row
    if data.outcome == "already-ended":
        why = f": {row.error}" if row.error and row.state != "done" else ""
        return f"batch {row.id} already ended ({row.state}{why})"
    if data.outcome == "cancelled":
        return f"batch {row.id}: cancel requested by {data.by}; cancelled before it started"
    if data.outcome == "ended":
        return f"batch {row.id}: cancel requested by {data.by}; ended {row.state}: {row.error}"
    return f"batch {row.id}: cancel requested by {data.by}; stopped by its runner ({row.state})"


def digest(data: Digest, fmt: str = "text") -> str:
    text = render_text("digest", digest=data.digest)
    if fmt == "json":
        return json.dumps(data.digest, indent=2, ensure_ascii=False) + "\n"
    if fmt == "slack":
        return json.dumps(digest_payload(data, fallback=text), indent=2, ensure_ascii=False) + "\n"
    return text


def digest_payload(data: Digest, *, fallback: str | None = None) -> dict[str, Any]:
    text = fallback if fallback is not None else render_text("digest", digest=data.digest)
    return render_blocks("digest", fallback=text, digest=data.digest,
                         chart=data.chart is not None)


def presets(data: list[Preset]) -> str:
    return render_text("presets", presets=data)


def history(data: list[dict[str, Any]]) -> str:
    return render_text("history", items=data)


def help_(commands: tuple[str, ...]) -> str:
    return render_text("help", commands=commands)


def error(message: str, *, hint: str | None = None, usage: bool = False) -> str:
    return render_text("error", message=message, hint=hint, usage=usage)


def compared(data: dict[str, Any], fmt: str = "text") -> str:
    """A comparison of two batches (`jobs.commands.compare`) in `fmt` (text, json, slack)."""
    if fmt == "json":
        return redact(json.dumps(data, indent=2, ensure_ascii=False),
                      secrets=secret_values(os.environ)) + "\n"
    width = name_width([r["approach"] for r in data["approaches"]])
    text = render_text("compare", c=data, width=width)
    if fmt == "slack":
        return json.dumps(compared_payload(data, fallback=text), indent=2,
                          ensure_ascii=False) + "\n"
    return text


def compared_payload(data: dict[str, Any], *, fallback: str | None = None) -> dict[str, Any]:
    text = fallback if fallback is not None else compared(data)
    headline = text.splitlines()[0] if text else "specbench compare"
    return render_blocks("compare", fallback=headline, c=data)


# --- the regression watch (docs/contracts.md "Regression watch") ---


def watch_added(data: Added) -> str:
    return render_text("watch_added", w=data.watch, schedule=describe_schedule(
        data.watch.schedule), sets=describe_sets(data.watch.sets), next_run=_when(data.next_run))


def watch_list(rows: list[WatchRow], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps([r.to_dict() for r in rows], indent=2) + "\n"
    return render_text("watch_list", watches=[
        {"w": r, "schedule": describe_schedule(r.schedule), "sets": describe_sets(r.sets)}
        for r in rows])


def watch_shown(data: WatchShown, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(watch_json(data), indent=2, ensure_ascii=False) + "\n"
    series = watch_json(data)["series"]
    return render_text("watch_show", w=data.watch, schedule=describe_schedule(
        data.watch.schedule), sets=describe_sets(data.watch.sets), series=series,
        changes=[{"c": c, "line": outcome_text(c)} for c in data.changes],
        precision=data.precision)


def watch_json(data: WatchShown) -> dict[str, Any]:
    """docs/contracts.md's `watch show --format json`."""
    row = data.watch
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for point in data.series:
        series.setdefault((point.key.approach, point.key.key, point.key.load), []).append(
            point.to_dict())
    return {**row.to_dict(), "owner": row.owner, "sets": list(row.sets),
            "created_at": row.created_at.isoformat(), "last_batch": row.last_batch,
            "precision": data.precision,
            "series": [{"approach": a, "key": k, "load": load or None, "points": points}
                       for (a, k, load), points in series.items()],
            "changes": [c.to_dict() for c in data.changes]}


def watch_moved(row: WatchRow) -> str:
    return f"watch {row.id} ({row.preset}) is {row.state}"


def watch_acked(data: Acked) -> str:
    change, by, at = data.change, data.change.data.get("by"), data.change.data.get("at")
    verb = "acknowledged" if change.state == "acknowledged" else "dismissed (not a regression)"
    if data.applied:
        return f"change {change.id} of watch {data.watch} {verb} by {by}"
    return f"change {change.id} of watch {data.watch} was already {verb} by {by} at {at}"


def watch_alert(change: Change, *, watch: WatchRow,
                bisecting: dict[str, Any] | None = None) -> dict[str, Any]:
    """The alert (a confirmed change) as a chat.postMessage payload, with its buttons; with
    `bisecting`, the bisection it started (`batch`) or what one would need (`needs`), or why
    none runs (`why`)."""
    context = {"c": change, "w": watch, "headline": headline(change),
               "diff": diff_text(list(change.data.get("stack_diff") or [])),
               "bisecting": bisecting or {}}
    text = render_text("watch_alert", **context)
    return render_blocks("watch_alert", fallback=text, text=text, **context)


def watch_bisected(change: Change, *, watch: WatchRow, row: BatchRow) -> dict[str, Any]:
    """The end of the bisection a confirmed change started, in the watch's thread."""
    found = (row.report or {}).get("bisect")
    return watch_line(render_text("watch_bisect", w=watch, c=change, row=row,
                                  b=found if isinstance(found, dict) else None).strip())


def watch_line(text: str) -> dict[str, Any]:
    """A watch's one-line thread message (a blip, an acknowledgement)."""
    return render_blocks("watch_line", fallback=text, text=text)


def watch_night(
    *, watch: WatchRow, outcome: str, slot: datetime | None = None, **data: Any,
) -> dict[str, Any]:
    """A night in the watch's thread: started, skipped, not started, or ended (`state`,
    `error`, `found`: the changes its report holds)."""
    found = list(data.pop("found", None) or [])
    context = {"w": watch, "outcome": outcome, "slot": None if slot is None else _when(slot),
               "batch": None, "why": None, "state": None, "error": None, **data,
               "found": found, "confirmed": sum(1 for c in found if c.get("state") != "blip")}
    return watch_line(render_text("watch_night", **context).strip())


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
