"""How long a batch's server logs are kept: `SPECBENCH_LOG_RETENTION_DAYS` (default 30).

Each batch writes its servers' and benchmarks' logs under `data_dir()/logs/<batch>/` (about
50 kB a batch); nothing else removed them. A folder untouched for longer than the retention (by
the newest modification time of anything in it) is removed, unless its batch is still queued or
running. The store's records (each with its log tail) are kept: `show`, `compare`, the digest and
the Show-logs button read those, never the files. `errors.log` and anything else under `logs/`
is left alone. A worker prunes at start and hourly (`start_pruning`); an embedded process (the
CLI, the console, a bot without a broker) once when it starts its in-process worker. Pruning
runs on a thread of its own: nothing waits for it.

`SPECBENCH_LOG_RETENTION_DAYS`: a positive number of days; `off` (or 0, `never`) keeps the logs
for ever, and so does a value that is not a number (with a warning): an unreadable setting never
deletes anything.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from jobs import settings

log = logging.getLogger(__name__)

ENV = "SPECBENCH_LOG_RETENTION_DAYS"
DEFAULT_DAYS = 30.0
INTERVAL_S = 3600.0  # how often a long-lived process prunes again
_FOREVER = ("off", "never", "none", "0")
_BATCH_FOLDER = re.compile(r"b-[A-Za-z0-9_.-]+")


def retention_days() -> float | None:
    """The retention in days from the environment; None: keep the logs for ever."""
    raw = os.environ.get(ENV, "").strip().lower()
    if not raw:
        return DEFAULT_DAYS
    if raw in _FOREVER:
        return None
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not 0 < days < float("inf"):
        log.warning("%s=%r is not a positive number of days; server logs are kept for ever",
                    ENV, raw[:40])
        return None
    return days


def logs_dir() -> Path:
    return settings.data_dir().resolve() / "logs"


def prune_logs(*, days: float | None,
               keep: Collection[str] | Callable[[], Collection[str]] = (),
               now: float | None = None) -> list[str]:
    """Remove each batch's log folder untouched for more than `days` (None: none), except the
    batches in `keep` (or that `keep()` gives, asked only when a folder is old enough); the
    batch IDs removed."""
    folder = logs_dir()
    if days is None or not folder.is_dir():
        return []
    cutoff = (time.time() if now is None else now) - days * 86400
    old = [entry for entry in sorted(folder.iterdir())
           if _BATCH_FOLDER.fullmatch(entry.name) and entry.is_dir()
           and not entry.is_symlink() and _newest_mtime(entry) < cutoff]
    if not old:
        return []
    kept = set(keep() if callable(keep) else keep)
    removed = []
    for entry in old:
        if entry.name in kept:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if entry.exists():
            log.warning("could not remove the old server logs in %s", entry)
        else:
            removed.append(entry.name)
    if removed:
        log.info("removed the server logs of %d batch(es) older than %g days: %s", len(removed),
                 days, ", ".join(removed[:20]) + (" ..." if len(removed) > 20 else ""))
    return removed


def _newest_mtime(folder: Path) -> float:
    newest = folder.stat().st_mtime
    for path in folder.rglob("*"):
        try:
            newest = max(newest, path.lstat().st_mtime)
        except OSError:  # removed meanwhile
            continue
    return newest


def start_pruning(unfinished: Callable[[], Collection[str]], *, every: float | None = INTERVAL_S,
                  stop: threading.Event | None = None) -> threading.Thread:
    """A daemon thread that prunes now and then every `every` s (None: only now) until `stop`
    is set; `unfinished()` gives the batches whose logs stay whatever their age (when it fails,
    that round is skipped: nothing is removed without knowing)."""
    stopped = stop or threading.Event()

    def loop() -> None:
        while True:
            days = retention_days()
            if days is not None:
                try:
                    prune_logs(days=days, keep=unfinished)
                except Exception:  # noqa: BLE001 - housekeeping: the next round tries again
                    log.warning("pruning old server logs failed", exc_info=True)
            if every is None or stopped.wait(every):
                return

    thread = threading.Thread(target=loop, name="log-retention", daemon=True)
    thread.start()
    return thread
