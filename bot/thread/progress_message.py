"""The progress message of a batch's thread, edited in place: one row per approach, each as the
latest event (or the stored run) left it, and the `Coalescer` that holds a thread's edits back to
one round every `interval` seconds, so that intermediate states coalesce into the latest one.

A running row says its phase and what its bench passes measured so far, with units (the words
are `jobs.core.progress`'s): `rep 2/3 · warm-up 459 tok/s (not a sample) · reps: 879 tok/s`.
A sweep's confirmation (docs/contracts.md: one experiment with its sweep) gets rows of its own
below.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.thread.messages import Message, render_message
from jobs.core.events import Event
from jobs.core.levels import MARKS
from jobs.core.plans import load_label
from jobs.core.progress import outcome_text, phase_text, result_text, value_text
from jobs.core.records import RunRecord

VERDICT_ICONS = {**MARKS, "ok": "✓"}


@dataclass
class ProgressRow:
    approach: str
    icon: str = "·"
    detail: str = "waiting"
    done: bool = False
    warmup: str | None = None  # the warm-up's result, once it has one
    samples: list[str] = field(default_factory=list)  # each repetition's value so far
    current: str = ""  # the phase running now
    level: Event | None = None  # the latest `level` phase (DESIGN23 "Phases"), with loads
    done_levels: list[str] = field(default_factory=list)  # earlier levels: 'c=1: 879 tok/s'

    def on_phase(self, event: Event) -> None:
        """A running row after one `approach.phase` event: its phase, then what it measured
        (at the level running now; the earlier levels' repetitions summed up after it)."""
        if event.get("phase") == "level":
            self._next_level(event)
        if event.get("phase") == "result":
            if event.get("warmup"):
                self.warmup = result_text(event)
            else:
                self.samples.append(value_text(event.get("value"), event.get("metric"))
                                    if not event.get("why") else "no sample")
        else:
            self.current = phase_text(event, self.level)
        measured = [self.warmup] if self.warmup else []
        levels = [*self.done_levels, *([self._level_values()] if self.samples else [])]
        if self.level is None and self.samples:
            measured.append("reps: " + ", ".join(self.samples))
        elif levels:  # each level's values, lowest first: 'c=1: 130 tok/s; c=4: 112 tok/s'
            measured.append("; ".join(levels))
        self.icon, self.detail = "▶", " · ".join([self.current, *measured])

    def _level_values(self) -> str:
        where = load_label((self.level or {}).get("load") or {}, short=True)
        return f"{where}: {', '.join(self.samples)}"

    def _next_level(self, event: Event) -> None:
        if self.level is not None and self.samples:
            self.done_levels.append(self._level_values())
        self.level, self.warmup, self.samples = event, None, []


@dataclass
class ProgressMessage:
    """What the progress message shows: a row per approach and, once started, the elapsed time."""

    batch: str
    rows: dict[str, ProgressRow]
    started_at: float | None = None  # time.monotonic() at batch.started
    sweep: dict[str, Any] | None = None  # batch.started's sweep: its points get rows as they run
    # A sweep's confirmation, run inside the sweep batch: its rows, from `sweep.confirmation`
    confirmation: ProgressMessage | None = None
    final: str | None = None  # the confirmation's end state, once it ended
    paused: str | None = None  # why the batch is paused now (batch.paused), until it goes on

    @classmethod
    def of(cls, batch: str, approaches: Iterable[str]) -> ProgressMessage:
        return cls(batch, {a: ProgressRow(a) for a in approaches})

    def add_records(self, records: Iterable[RunRecord]) -> None:
        """The rows of the approaches whose run is stored, unless already ended."""
        for record in records:  # a sweep's points have a row once they have a run
            row = self.rows.get(record.approach)
            if row is None or not row.done:
                self.rows[record.approach] = to_stored_row(record)

    def apply(self, event: Event) -> bool:
        """Update the rows from one event; True when the message changed."""
        kind = event.get("type")
        if kind == "sweep.confirmation" and isinstance(event.get("event"), dict):
            return self._confirming(event["event"])
        if kind == "batch.paused":  # a full data dir, a worker told to stop
            self.paused = str(event.get("reason") or "paused")
        elif kind == "batch.resumed":
            self.paused = None
        elif kind == "batch.started":
            self.started_at = time.monotonic()
            self.sweep = event.get("sweep") or None
            self.paused = None  # a worker took it (again)
        elif kind in ("approach.phase", "approach.finished") and self._is_new_point(event):
            self.rows[str(event["approach"])] = ProgressRow(str(event["approach"]))
            return self.apply(event)
        elif kind == "approach.phase" and event.get("approach") in self.rows:
            self.rows[event["approach"]].on_phase(event)
        elif kind == "approach.finished" and event.get("approach") in self.rows:
            self.rows[event["approach"]] = to_finished_row(event)
        else:
            return False
        return True

    def _confirming(self, event: Event) -> bool:
        """One event of the sweep's confirmation batch: its own rows, under the sweep's."""
        kind = event.get("type")
        if kind == "batch.started" or self.confirmation is None:
            self.confirmation = ProgressMessage.of(str(event.get("batch")),
                                                   event.get("approaches") or [])
        if kind in ("batch.finished", "batch.cancelled"):
            self.confirmation.final = str(event.get("state") or "done")
            return True
        return self.confirmation.apply(event)

    def _is_new_point(self, event: Event) -> bool:
        name = event.get("approach")
        return (self.sweep is not None and isinstance(name, str) and name not in self.rows
                and name.startswith(f"{self.sweep.get('name')}@"))

    def render(self, *, final: str | None = None) -> Message:
        """The message (not yet scrubbed of secrets); `final` is the batch's end state."""
        elapsed = None if self.started_at is None else time.monotonic() - self.started_at
        sweep = None
        if self.sweep is not None:
            prefix = f"{self.sweep.get('name')}@"
            sweep = {**self.sweep, "point": sum(a.startswith(prefix) for a in self.rows)}
        confirming = None if self.confirmation is None else {
            "batch": self.confirmation.batch, "rows": list(self.confirmation.rows.values()),
            "finished": sum(r.done for r in self.confirmation.rows.values()),
            "final": self.confirmation.final,
        }
        return render_message(
            "batch_progress", batch=self.batch, rows=list(self.rows.values()), final=final,
            elapsed=elapsed, finished=sum(r.done for r in self.rows.values()), sweep=sweep,
            confirmation=confirming, paused=None if final else self.paused,
        )


def to_finished_row(event: Event) -> ProgressRow:
    """An approach.finished event's row: its verdict, value with its unit, change and cause."""
    verdict = event.get("verdict") or event.get("status") or "done"
    return ProgressRow(str(event.get("approach")), VERDICT_ICONS.get(verdict, "✓"),
                       outcome_text(event), True)


def to_stored_row(record: RunRecord) -> ProgressRow:
    return ProgressRow(record.approach, "✓" if record.status == "ok" else "✗", record.status, True)


@dataclass
class Coalescer:
    """A thread's edits, at most one round every `interval` seconds: what changes in between
    is only marked pending (`progress`, `parent`) and shown once, as it is at the next round."""

    interval: float
    progress: bool = False  # the progress message changed since its last edit
    parent: bool = False  # the parent message did
    flushed_at: float = 0.0  # time.monotonic() of the last round

    @property
    def is_pending(self) -> bool:
        return self.progress or self.parent

    def is_due(self) -> bool:
        return time.monotonic() - self.flushed_at >= self.interval

    def remaining(self) -> float:
        """Seconds until the next round may start."""
        return max(self.flushed_at + self.interval - time.monotonic(), 0.0)

    def flushed(self) -> None:
        self.flushed_at = time.monotonic()
