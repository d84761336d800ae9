"""A batch's chat thread: follows its events and drives a `Poster` (Slack or the console).

The thread is: a parent message (preset, who, host, queue position); in the thread one progress
message edited in place, at most once per batch every `interval` seconds (intermediate states
coalesce); at the end the summary as a reply with its buttons, the chart and the run records as
uploads, and the parent edited to the headline. Posting state lives in the store, so a restarted
bot resumes a thread and posts each summary once (`ThreadHub.catch_up`). With a durable `Feed`
(distributed mode: a Redis consumer group) each event is acknowledged only once its thread has
handled it (an end event: once the summary is posted), so a bot that dies mid-batch leaves the
rest of its events to its successor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from jobs import settings
from jobs.batches.dispatch import Submitted
from jobs.charts.summary import to_chart_png
from jobs.core.events import Event
from jobs.core.messages import environment, fit_blocks, render_blocks, render_text, summary_payload
from jobs.core.plans import to_plan
from jobs.core.records import RunRecord
from jobs.store import TERMINAL_STATES, BatchRow

if TYPE_CHECKING:
    from bot.thread.thread_hub import ThreadHub

log = logging.getLogger(__name__)

END_EVENTS = ("batch.finished", "batch.cancelled")
STORE_POLL_S = 5.0  # how often an idle thread checks the store for an end it missed
LOG_LINES = 40
EARLY_BATCHES = 100


@dataclass(frozen=True)
class Message:
    """One message: `text` is what a terminal shows, `blocks` what Slack shows."""

    text: str
    blocks: list[dict[str, Any]] | None = None
    fallback: str | None = None  # Slack's notification text (defaults to `text`)


@dataclass(frozen=True)
class Upload:
    filename: str
    content: bytes
    title: str


class Poster(Protocol):
    """Where a thread goes; returns message IDs (Slack's `ts`)."""

    async def post(self, *, channel: str, thread_ts: str | None, message: Message) -> str: ...

    async def update(self, *, channel: str, ts: str, message: Message) -> None: ...

    async def upload(self, *, channel: str, thread_ts: str, files: list[Upload]) -> None: ...

    async def ephemeral(
        self, *, channel: str, user: str, message: Message, thread_ts: str | None = None
    ) -> None: ...


class FeedEntry(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def event(self) -> Event: ...


class Feed(Protocol):
    """A durable event source (jobs.broker.streams.StreamReader): entries stay pending until acked."""

    def read(self, timeout: float) -> Sequence[FeedEntry]: ...

    def ack(self, *entry_ids: str) -> None: ...

    def close(self) -> None: ...


Ack = str | None  # the feed entry an event came from; None without a durable feed


@dataclass
class _Row:
    approach: str
    icon: str = "·"
    detail: str = "waiting"
    done: bool = False


@dataclass
class BatchThread:
    """One batch's thread; `events` is fed by the hub, in order, each with its feed entry."""

    hub: ThreadHub
    row: BatchRow
    channel: str
    parent_ts: str | None = None
    progress_ts: str | None = None
    events: asyncio.Queue[tuple[Event, Ack]] = field(default_factory=asyncio.Queue)
    position: int | None = None
    live_workers: int | None = None
    host: str | None = None
    report: dict[str, Any] | None = None
    rows: dict[str, _Row] = field(default_factory=dict)
    started_at: float | None = None
    _flushed_at: float = 0.0
    _dirty: bool = False
    _parent_dirty: bool = False
    _unacked: list[Ack] = field(default_factory=list)

    def __post_init__(self) -> None:
        plan = to_plan(self.row.plan)
        self.rows = {c.approach: _Row(c.approach) for c in plan.configs}
        self.secrets = {k: v for c in plan.configs for k, v in c.env.items()
                        if settings.is_secret_name(k)}
        self.host = self.row.host
        for record in self.hub.dispatcher.store.records(self.row.id):
            if record.approach in self.rows:
                self.rows[record.approach] = _Row(record.approach, "✓" if record.status == "ok"
                                                  else "✗", record.status, True)

    # --- messages ---

    def _parent(self, *, ended: str | None = None, error: str | None = None) -> Message:
        plan = to_plan(self.row.plan)
        context = dict(
            preset=self.row.preset, batch=self.row.id, who=self.row.requested_by,
            approaches=len(plan.configs), reps=plan.reps, host=self.host, queue=self.row.queue,
            position=self.position, live_workers=self.live_workers, report=self.report,
            ended=ended, error=error, warnings=list(plan.warnings) if not self.report else [],
        )
        text = render_text("batch_parent", **context)
        return self._message(text, "batch_parent", context)

    def _progress(self, *, final: str | None = None) -> Message:
        elapsed = None if self.started_at is None else time.monotonic() - self.started_at
        context = dict(
            batch=self.row.id, rows=list(self.rows.values()), final=final, elapsed=elapsed,
            finished=sum(r.done for r in self.rows.values()),
        )
        text = render_text("batch_progress", **context)
        return self._message(text, "batch_progress", context)

    def _message(self, text: str, name: str, context: dict[str, Any]) -> Message:
        payload = render_blocks(name, fallback=text, text=text, **context)
        return self.scrub(Message(text=text, blocks=payload["blocks"]))

    def scrub(self, message: Message) -> Message:
        """The message with every secret (process env, this batch's env) masked."""
        return Message(
            text=self.redact(message.text),
            blocks=None if message.blocks is None else _redact_tree(message.blocks, self.redact),
            fallback=None if message.fallback is None else self.redact(message.fallback),
        )

    def redact(self, text: str) -> str:
        return settings.redact(text, self.secrets)

    # --- lifecycle ---

    async def open(self, submitted: Submitted | None = None) -> None:
        """Post the parent and the progress message (unless a resumed thread has them)."""
        poster, store = self.hub.poster, self.hub.dispatcher.store
        if submitted is not None:
            self.position, self.live_workers = submitted.position, submitted.live_workers
        if self.parent_ts is None:
            self.parent_ts = await poster.post(channel=self.channel, thread_ts=None,
                                               message=self._parent())
            if self.hub.durable:
                store.set_thread(self.row.id, self.channel, self.parent_ts)
        if self.progress_ts is None:
            self.progress_ts = await poster.post(channel=self.channel, thread_ts=self.parent_ts,
                                                 message=self._progress())
            if self.hub.durable:
                store.set_progress_ts(self.row.id, self.progress_ts)
        self._flushed_at = time.monotonic()

    async def follow(self) -> None:
        """Apply events until the batch ends, then post its end (summary, uploads, headline)."""
        store = self.hub.dispatcher.store
        checked = time.monotonic()
        while True:
            wait = STORE_POLL_S
            if self._dirty or self._parent_dirty:
                wait = max(self._flushed_at + self.hub.interval - time.monotonic(), 0.0)
            event: Event | None = None
            entry: Ack = None
            try:
                # not wait_for: on 3.11 it can swallow a cancel that races an event's arrival
                async with asyncio.timeout(wait):
                    event, entry = await self.events.get()
            except TimeoutError:
                event = None
            if event is not None:
                if self._apply(event):
                    self._unacked.append(entry)  # acked once the end is posted
                    break
                self.hub.ack(entry)
            if event is None and time.monotonic() - checked >= STORE_POLL_S:
                checked = time.monotonic()
                row = store.get_batch(self.row.id)
                if row is not None and row.state in TERMINAL_STATES:
                    self.row = row
                    break
            if time.monotonic() - self._flushed_at >= self.hub.interval:
                await self._flush()
        await self.finish()

    def _apply(self, event: Event) -> bool:
        """Update the state from one event; True at the batch's end."""
        kind = event.get("type")
        if kind == "batch.queued":
            self.position = event.get("position", self.position)
            self._parent_dirty = True
        elif kind == "batch.started":
            self.host = event.get("host")
            self.started_at = time.monotonic()
            self._parent_dirty = True
        elif kind == "approach.phase" and event.get("approach") in self.rows:
            row = self.rows[event["approach"]]
            phase = event.get("phase", "")
            row.icon, row.detail = "▶", (
                f"repetition {event.get('rep')} of {event.get('reps')}"
                if phase == "repetition" else str(phase)
            )
        elif kind == "approach.finished" and event.get("approach") in self.rows:
            self.rows[event["approach"]] = _finished_row(event)
        elif kind in END_EVENTS:
            self.report = event.get("report")
            return True
        else:
            return False
        self._dirty = True
        return False

    async def _flush(self) -> None:
        poster = self.hub.poster
        if self._dirty and self.progress_ts is not None:
            self._dirty = False
            await poster.update(channel=self.channel, ts=self.progress_ts,
                                message=self._progress())
        if self._parent_dirty and self.parent_ts is not None:
            self._parent_dirty = False
            await poster.update(channel=self.channel, ts=self.parent_ts, message=self._parent())
        self._flushed_at = time.monotonic()

    async def finish(self) -> None:
        """Post the batch's end once (a durable claim in the store guards it)."""
        store, poster, durable = self.hub.dispatcher.store, self.hub.poster, self.hub.durable
        if durable and not store.claim_summary(self.row.id):
            self._ack_rest()  # another bot posts it
            return
        try:
            row = store.get_batch(self.row.id) or self.row
            self.row = row
            self.report = self.report or row.report
            if self.parent_ts is None:  # a batch that ended before its thread could open
                await self.open()
            assert self.parent_ts is not None and self.progress_ts is not None
            state = row.state if row.state in TERMINAL_STATES else "done"
            await self._final_progress(state)
            if self.report is not None:
                await poster.post(channel=self.channel, thread_ts=self.parent_ts,
                                  message=self._summary(self.report))
                files = self._uploads(self.report)
                if files:
                    await poster.upload(channel=self.channel, thread_ts=self.parent_ts,
                                        files=files)
            ended = None if self.report else state
            await poster.update(channel=self.channel, ts=self.parent_ts,
                                message=self._parent(ended=ended, error=row.error))
            if durable:
                store.mark_summary_posted(row.id)
            self._ack_rest()
        except BaseException:
            if durable:
                store.release_summary_claim(self.row.id)
            raise

    def _ack_rest(self) -> None:
        """The thread has ended: its end event and whatever came after are handled."""
        while not self.events.empty():
            self._unacked.append(self.events.get_nowait()[1])
        self.hub.ack(*self._unacked)
        self._unacked.clear()

    async def _final_progress(self, state: str) -> None:
        assert self.progress_ts is not None
        for record in self.hub.dispatcher.store.records(self.row.id):
            if record.approach in self.rows and not self.rows[record.approach].done:
                self.rows[record.approach] = _Row(record.approach, "✓" if record.status == "ok"
                                                  else "✗", record.status, True)
        self._dirty = False
        await asyncio.sleep(max(self._flushed_at + self.hub.interval - time.monotonic(), 0.0))
        self._flushed_at = time.monotonic()
        await self.hub.poster.update(channel=self.channel, ts=self.progress_ts,
                                     message=self._progress(final=state))

    def _summary(self, report: dict[str, Any]) -> Message:
        from jobs.core.messages import render_report

        payload = summary_payload(report)
        results = report.get("results", [])
        inconclusive = [r["approach"] for r in results if r.get("verdict") == "inconclusive"]
        failed = [r["approach"] for r in results if r.get("verdict") == "failed"]
        blocks = fit_blocks(payload["blocks"])
        if inconclusive or failed:
            raw = environment().get_template("batch_summary_actions.slack.j2").render(
                batch=self.row.id, inconclusive=inconclusive, failed=failed)
            blocks = blocks[: 49] + json.loads(raw)
        return self.scrub(Message(text=render_report(report, "text"), blocks=blocks,
                                  fallback=payload["text"]))

    def _uploads(self, report: dict[str, Any]) -> list[Upload]:
        records = self.hub.dispatcher.store.records(self.row.id)
        plan = to_plan(self.row.plan)
        files: list[Upload] = []
        png = to_chart_png(records, metric=plan.metric, lower_is_better=plan.lower_is_better)
        if png is not None:
            files.append(Upload(f"{self.row.id}-chart.png", png,
                                f"{plan.metric}: each approach against the baseline"))
        lines = [self.redact(json.dumps(_shown(r))) for r in records]
        files.append(Upload(f"{self.row.id}-runs.jsonl", ("\n".join(lines) + "\n").encode(),
                            f"run records of {self.row.id}"))
        return files


def _finished_row(event: Event) -> _Row:
    verdict = event.get("verdict") or event.get("status") or "done"
    icon = {"improved": "▲", "regressed": "▼", "unchanged": "=", "inconclusive": "?",
            "failed": "✗", "cancelled": "■", "skipped": "·", "ok": "✓"}.get(verdict, "✓")
    detail = str(verdict)
    if event.get("value") is not None:
        detail += f" {event['value']:.4g}"
    if event.get("delta_pct") is not None:
        detail += f" ({event['delta_pct']:+.1f}%)"
    if event.get("cause"):
        detail += f" [{event['cause']}]"
    return _Row(str(event.get("approach")), icon, detail, True)


def _shown(record: RunRecord) -> dict[str, Any]:
    """A run record as it may be uploaded: secret env values read ***, the log redacted."""
    data = record.to_dict()
    data["env"] = settings.redact_env(dict(record.env))
    data["log_tail"] = settings.redact(record.log_tail, record.env)
    return data


def _redact_tree(value: Any, redact: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_tree(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _redact_tree(v, redact) for k, v in value.items()}
    return value


def logs_message(*, store: Any, batch_id: str) -> Message:
    """The failed approaches' log tails (the Show-logs button), redacted."""
    records = store.records(batch_id)
    secrets = {k: v for r in records for k, v in r.env.items() if settings.is_secret_name(k)}
    logs = []
    for r in records:
        if r.status in ("failed", "timeout"):
            lines = settings.redact(r.log_tail, secrets).splitlines()[-LOG_LINES:]
            tail = "\n".join(lines)[-2800:].replace("```", "'''")
            logs.append({"approach": r.approach, "status": r.status, "cause": None,
                         "lines": len(lines), "tail": tail})
    return Message(text=settings.redact(render_text("batch_logs", batch=batch_id, logs=logs),
                                        secrets))
