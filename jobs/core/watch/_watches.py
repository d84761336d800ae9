"""A stored watch as plain data (docs/contracts.md "Regression watch", "Watches"): what the store
hands out, `watch list` shows, and a scheduler's tick reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.core.watch._schedule import Schedule, parse_schedule

ACTIVE, PAUSED, STOPPED = "active", "paused", "stopped"
WATCH_STATES = (ACTIVE, PAUSED, STOPPED)


@dataclass(frozen=True)
class WatchRow:
    """One watch: its preset and schedule, its `--set`s, who owns it and where its thread is,
    and the last slot its scheduler started or skipped."""

    id: int
    preset: str
    every: str
    at: str
    queue: str
    sets: tuple[str, ...]
    state: str
    owner: str
    channel: str | None
    thread_ts: str | None
    created_at: dt.datetime
    last_slot: dt.datetime | None = None
    last_batch: str | None = None

    @property
    def schedule(self) -> Schedule:
        return parse_schedule(self.every, self.at)

    def due_slot(self, now: dt.datetime) -> dt.datetime | None:
        """The slot a tick at `now` starts (the latest one not yet started or skipped), or
        None: not active, or nothing due."""
        if self.state != ACTIVE:
            return None
        slot = self.schedule.slot_at(now, added=self.created_at)
        if slot is None or (self.last_slot is not None and slot <= self.last_slot):
            return None
        return slot

    def to_dict(self) -> dict[str, object]:
        """docs/contracts.md's `watch list --format json` entry."""
        return {"id": self.id, "preset": self.preset, "every": self.every, "at": self.at,
                "queue": self.queue, "state": self.state}


def describe_sets(sets: Sequence[str]) -> str:
    return " ".join(f"--set {s}" for s in sets)
