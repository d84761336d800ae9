"""When a watch runs (docs/contracts.md "Regression watch"): `--every` and `--at` read and
checked, and the slot a scheduler's tick is due to start.

A watch's slots are its anchor (the `--at` time, UTC, on the day it was added) plus whole
multiples of its interval: daily every 24 hours, weekly every 7 days (on the weekday it was
added), hourly or `Nh` every N hours. A tick starts the latest slot at or before now when no run
has started for it yet: a scheduler down for three nights starts one run when it is back, not
three. More often than hourly is refused.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from jobs.errors import UserError

HOUR_S = 3600
NAMED = {"hourly": HOUR_S, "daily": 24 * HOUR_S, "weekly": 7 * 24 * HOUR_S}
MAX_INTERVAL_S = 7 * 24 * HOUR_S  # weekly is the longest: a slower watch catches nothing
DEFAULT_EVERY = "daily"
DEFAULT_AT = "02:00"
_SPAN = re.compile(r"^(\d{1,6})\s*(m|min|h|d)$")
_AT = re.compile(r"^(\d{1,2}):(\d{2})$")
_UNITS = {"m": 60, "min": 60, "h": HOUR_S, "d": 24 * HOUR_S}


@dataclass(frozen=True)
class Schedule:
    """`every` and `at` as typed (normalised), and the interval they mean."""

    every: str
    at: str
    interval_s: int

    def anchor(self, added: dt.datetime) -> dt.datetime:
        """The first slot's time: `at` (UTC) on the day the watch was added."""
        hour, minute = (int(part) for part in self.at.split(":"))
        day = added.astimezone(dt.UTC).date()
        return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)

    def slot_at(self, now: dt.datetime, *, added: dt.datetime) -> dt.datetime | None:
        """The latest slot at or before `now` that is not before the watch was added; None
        while there is none yet."""
        anchor = self.anchor(added)
        steps = (now - anchor).total_seconds() // self.interval_s
        slot = anchor + dt.timedelta(seconds=steps * self.interval_s)
        return slot if slot >= added.replace(second=0, microsecond=0) and slot <= now else None

    def next_slot(self, now: dt.datetime, *, added: dt.datetime) -> dt.datetime:
        """The first slot after `now` (and not before the watch was added)."""
        anchor = self.anchor(added)
        steps = (now - anchor).total_seconds() // self.interval_s + 1
        slot = anchor + dt.timedelta(seconds=steps * self.interval_s)
        while slot < added.replace(second=0, microsecond=0):
            slot += dt.timedelta(seconds=self.interval_s)
        return slot


def parse_schedule(every: str | None, at: str | None) -> Schedule:
    """`--every` (daily, weekly, hourly, Nh, Nd; at most weekly, at least hourly) and `--at`
    (HH:MM, UTC); UserError naming the bad one."""
    every_text = (every or DEFAULT_EVERY).strip().lower()
    at_text = (at or DEFAULT_AT).strip()
    interval = _interval(every_text)
    found = _AT.match(at_text)
    if found is None or int(found[1]) > 23 or int(found[2]) > 59:
        raise UserError(f"--at {at_text!r}: not a time of day; give HH:MM (UTC), e.g. 02:00")
    at_norm = f"{int(found[1]):02d}:{found[2]}"
    return Schedule(every=every_text, at=at_norm, interval_s=interval)


def _interval(every: str) -> int:
    if every in NAMED:
        return NAMED[every]
    found = _SPAN.match(every)
    if found is None:
        raise UserError(f"--every {every!r}: not an interval; give daily, weekly, hourly or a "
                        "number of hours (6h) or days (2d)")
    seconds = int(found[1]) * _UNITS[found[2]]
    if seconds < HOUR_S:
        raise UserError(f"--every {every}: a watch runs at most hourly; that is more often")
    if seconds > MAX_INTERVAL_S:
        raise UserError(f"--every {every}: a watch runs at least weekly; that is less often")
    if seconds % HOUR_S:
        raise UserError(f"--every {every}: give whole hours (1h, 2h...), daily or weekly")
    return seconds


def describe_schedule(schedule: Schedule) -> str:
    """'daily at 02:00 UTC', 'every 6h at 02:00 UTC'."""
    named = schedule.every in NAMED
    return f"{'' if named else 'every '}{schedule.every} at {schedule.at} UTC"
