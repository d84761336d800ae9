"""The digest's regression-watch section (docs/contracts.md "Digest", "Regression watch"): the
changes the watches confirmed in the period (alerts, an environment change labelled so, an
improvement as good news), how many candidates their confirmation did not confirm (blips), and
each watched key's precision (its confirmed changes nobody dismissed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.watch import ALERTED, BLIP, Change, WatchRow, diff_text, precision


def watch_section(
    found: Sequence[tuple[int, Change]],
    *,
    watches: Mapping[int, WatchRow],
    history: Mapping[int, Sequence[Change]],
) -> dict[str, Any]:
    """`found`: the period's settled changes with their watch's id; `history`: every change of
    each watch, for its keys' precision."""
    alerts = [_alert(c, watch_id=w, watch=watches.get(w)) for w, c in found
              if c.state in ALERTED]
    blips = [w for w, c in found if c.state == BLIP]
    return {
        "alerts": alerts,
        "blips": len(blips),
        "precision": [{"watch": w, "preset": watches[w].preset, **p}
                      for w in sorted(history) if w in watches
                      for p in precision(history[w])],
    }


def _alert(change: Change, *, watch_id: int, watch: WatchRow | None) -> dict[str, Any]:
    data = change.data
    return {"watch": watch_id, "preset": None if watch is None else watch.preset,
            "change": change.id, "approach": change.key.approach, "key": change.key.key,
            "load": change.key.load or None, "state": change.state,
            "delta_pct": change.delta_pct, "direction": data.get("direction"),
            "environment": change.environment, "first_bad": change.since,
            "stack_diff": diff_text(list(data.get("stack_diff") or []))}
