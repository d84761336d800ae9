"""The store's regression watches (docs/contracts.md "Regression watch"): the watches, their
series' points, the changes found in them and their acknowledgements (0010_watches).

Rows leave as the core's plain data (`jobs.core.watch`: `WatchRow`, `SeriesPoint`, `Change`).
Writes that a scheduler or a second click may race are decided by the database: a slot is
claimed by a conditional update (`claim_slot`), a point or a change is unique per batch and
series, and a change's acknowledgement is its own row keyed by the change (the first wins).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError

from jobs.core.watch import (
    ACTIONS,
    ACTIVE,
    CONFIRMED,
    Change,
    Schedule,
    SeriesKey,
    SeriesPoint,
    WatchRow,
)
from jobs.store.database import NO_SYNC, Database, now, rowcount
from jobs.store.schema import Watch, WatchAck, WatchChange, WatchPoint


class Watches(Database):
    """Watches, their points, changes and acknowledgements."""

    def add_watch(
        self, *, preset: str, schedule: Schedule, queue: str, sets: Sequence[str], owner: str,
        channel: str | None, created_at: dt.datetime, max_active: int,
    ) -> WatchRow | None:
        """A new active watch; None when `max_active` watches are active already (counted in
        the same transaction)."""
        with self._write() as session:
            active = session.scalar(select(func.count()).select_from(Watch)
                                    .where(Watch.state == ACTIVE)) or 0
            if active >= max_active:
                return None
            watch = Watch(preset=preset, every=schedule.every, at=schedule.at, queue=queue,
                          sets=json.dumps(list(sets)), state=ACTIVE, owner=owner,
                          channel=channel, created_at=created_at)
            session.add(watch)
            session.flush()
            return _watch_row(watch)

    def count_active_watches(self) -> int:
        with self._read() as session:
            return int(session.scalar(select(func.count()).select_from(Watch)
                                      .where(Watch.state == ACTIVE)) or 0)

    def get_watch(self, watch_id: int) -> WatchRow | None:
        with self._read() as session:
            watch = session.get(Watch, watch_id)
            return None if watch is None else _watch_row(watch)

    def list_watches(self, *, states: Sequence[str] | None = None) -> list[WatchRow]:
        query = select(Watch).order_by(Watch.id)
        if states is not None:
            query = query.where(Watch.state.in_(list(states)))
        with self._read() as session:
            return [_watch_row(w) for w in session.scalars(query)]

    def set_watch_state(self, watch_id: int, state: str) -> None:
        self._update_watch(watch_id, state=state)

    def set_watch_thread(self, watch_id: int, channel: str, thread_ts: str) -> None:
        self._update_watch(watch_id, channel=channel, thread_ts=thread_ts)

    def set_watch_batch(self, watch_id: int, batch_id: str) -> None:
        self._update_watch(watch_id, last_batch=batch_id)

    def claim_slot(self, watch_id: int, slot: dt.datetime) -> bool:
        """Mark `slot` started (or skipped): True for the one caller that moved the watch's
        last slot forward to it, False when it was there already."""
        query = (update(Watch).where(Watch.id == watch_id)
                 .where(or_(Watch.last_slot.is_(None), Watch.last_slot < slot))
                 .values(last_slot=slot))
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def put_points(self, watch_id: int, points: Sequence[SeriesPoint]) -> None:
        """One batch's points; a point already stored (a batch resumed) is kept as it was."""
        with self._write() as session:
            batches = {p.batch for p in points}
            have = {(b, a, k, load) for b, a, k, load in session.execute(
                select(WatchPoint.batch_id, WatchPoint.approach, WatchPoint.key,
                       WatchPoint.load)
                .where(WatchPoint.watch_id == watch_id, WatchPoint.batch_id.in_(batches)))}
            for p in points:
                if (p.batch, p.key.approach, p.key.key, p.key.load) in have:
                    continue
                session.add(WatchPoint(
                    watch_id=watch_id, batch_id=p.batch, approach=p.key.approach,
                    key=p.key.key, load=p.key.load, value=p.value, low=p.low, high=p.high,
                    lower_is_better=p.lower_is_better, at=p.at,
                    stack=json.dumps(dict(p.stack), default=str)))

    def series(self, watch_id: int) -> list[SeriesPoint]:
        """Every point of the watch, oldest first (by time, then as stored)."""
        query = (select(WatchPoint).where(WatchPoint.watch_id == watch_id)
                 .order_by(WatchPoint.at, WatchPoint.id))
        with self._read() as session:
            return [SeriesPoint(key=SeriesKey(p.approach, p.key, p.load), batch=p.batch_id,
                                at=p.at, value=p.value, low=p.low, high=p.high,
                                stack=json.loads(p.stack),
                                lower_is_better=bool(p.lower_is_better))
                    for p in session.scalars(query)]

    def put_change(self, watch_id: int, change: Change) -> Change:
        """A candidate stored (or the one stored for the same batch and series), with its id."""
        values = _change_key(watch_id, change)
        try:
            with self._write() as session:
                row = WatchChange(**values, state=change.state, confirmation=change.confirmation,
                                  data=json.dumps(dict(change.data), default=str),
                                  created_at=now())
                session.add(row)
                session.flush()
                return _change(row, None)
        except IntegrityError:
            with self._read() as session:
                found = session.scalars(select(WatchChange).filter_by(**values)).one()
                return _change(found, None)

    def settle_change(self, change_id: int, change: Change) -> None:
        """A candidate's outcome: its state, confirmation batch and figures."""
        query = (update(WatchChange).where(WatchChange.id == change_id)
                 .values(state=change.state, confirmation=change.confirmation,
                         data=json.dumps(dict(change.data), default=str)))
        with self._write() as session:
            session.execute(query, execution_options=NO_SYNC)

    def watch_changes(self, watch_id: int) -> list[Change]:
        """The watch's changes, oldest first, each with its acknowledgement."""
        query = (select(WatchChange, WatchAck).outerjoin(
            WatchAck, WatchAck.change_id == WatchChange.id)
            .where(WatchChange.watch_id == watch_id).order_by(WatchChange.id))
        with self._read() as session:
            return [_change(c, a) for c, a in session.execute(query).all()]

    def get_change(self, change_id: int) -> tuple[int, Change] | None:
        """(its watch's id, the change), or None."""
        query = (select(WatchChange, WatchAck).outerjoin(
            WatchAck, WatchAck.change_id == WatchChange.id).where(WatchChange.id == change_id))
        with self._read() as session:
            found = session.execute(query).first()
            return None if found is None else (found[0].watch_id, _change(found[0], found[1]))

    def ack_change(self, change_id: int, *, action: str, user: str, at: dt.datetime) -> bool:
        """Record `action` ("ack" or "dismiss") on a confirmed change: True when this call did,
        False when the change had its acknowledgement already (or is not confirmed)."""
        try:
            with self._write() as session:
                moved = session.execute(
                    update(WatchChange).where(WatchChange.id == change_id,
                                              WatchChange.state == CONFIRMED)
                    .values(state=ACTIONS[action]), execution_options=NO_SYNC)
                if rowcount(moved) != 1:
                    return False
                session.add(WatchAck(change_id=change_id, action=action, user=user, at=at))
        except IntegrityError:
            return False
        return True

    def unposted_changes(self) -> list[tuple[int, Change]]:
        """Settled changes (confirmed or blips) whose thread was not told yet, oldest first."""
        query = (select(WatchChange).where(WatchChange.posted_at.is_(None),
                                           WatchChange.state != "candidate")
                 .order_by(WatchChange.id))
        with self._read() as session:
            return [(c.watch_id, _change(c, None)) for c in session.scalars(query)]

    def mark_change_posted(self, change_id: int) -> None:
        query = update(WatchChange).where(WatchChange.id == change_id).values(posted_at=now())
        with self._write() as session:
            session.execute(query, execution_options=NO_SYNC)

    def changes_between(
        self, since: dt.datetime, until: dt.datetime,
    ) -> list[tuple[int, Change]]:
        """Settled changes found in [since, until], oldest first, with their watch's id."""
        query = (select(WatchChange, WatchAck).outerjoin(
            WatchAck, WatchAck.change_id == WatchChange.id)
            .where(WatchChange.created_at >= since, WatchChange.created_at <= until,
                   WatchChange.state != "candidate").order_by(WatchChange.id))
        with self._read() as session:
            return [(c.watch_id, _change(c, a)) for c, a in session.execute(query).all()]

    def _update_watch(self, watch_id: int, **values: Any) -> None:
        with self._write() as session:
            session.execute(update(Watch).where(Watch.id == watch_id).values(values),
                            execution_options=NO_SYNC)


def _watch_row(w: Watch) -> WatchRow:
    return WatchRow(id=w.id, preset=w.preset, every=w.every, at=w.at, queue=w.queue,
                    sets=tuple(json.loads(w.sets)), state=w.state, owner=w.owner,
                    channel=w.channel, thread_ts=w.thread_ts, created_at=w.created_at,
                    last_slot=w.last_slot, last_batch=w.last_batch)


def _change_key(watch_id: int, change: Change) -> dict[str, Any]:
    return {"watch_id": watch_id, "batch_id": change.batch, "approach": change.key.approach,
            "key": change.key.key, "load": change.key.load}


def _change(row: WatchChange, ack: WatchAck | None) -> Change:
    data: dict[str, Any] = json.loads(row.data)
    if ack is not None:
        data.update(by=ack.user, at=ack.at.isoformat())
    return Change(key=SeriesKey(row.approach, row.key, row.load), batch=row.batch_id,
                  state=row.state, data=data, id=row.id, confirmation=row.confirmation)
