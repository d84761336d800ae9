"""A full data dir pauses a batch; it resumes, the interrupted configuration run again, once
space returns (docs/contracts.md "Bad input and bad days": a full disk).

The data dir (SPECBENCH_DATA_DIR) holds what a configuration's run writes as it goes: its
server's and benchmark's logs, each repetition's result file, its load levels' checkpoint, the
process-group registry. When it is full (ENOSPC) a run fails or loses its output through no
fault of its configuration, so its result is not kept: `with_room` pauses the batch with a line
in its thread (`batch.paused`), looks for room again and again (a probe write of `PROBE_BYTES`,
after 0.5, 1, 2, 4, then every 5 s), says so once there is (`batch.resumed`), and runs the
configuration again. A batch is never failed for a full disk; a cancel, a lost lease or a worker
told to stop (its stop check) ends the wait at once. A run that failed while the data dir has
room keeps its record, so a configuration that fails for its own reasons is never run twice.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jobs import settings
from jobs.core.events import EventSink, make_event
from jobs.core.records import RunRecord

log = logging.getLogger(__name__)

PROBE_BYTES = 64 * 1024  # a server log's worth of lines: less room than this is no room
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 5.0
STOP_CHECK_S = 0.5  # a cancel or a stop is noticed this fast while paused
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_KEPT = ("ok", "cancelled", "skipped")  # results a full disk cannot have spoilt


def is_no_space(exc: BaseException | None) -> bool:
    """Whether `exc` (or an error it was raised from) says a disk or quota is full."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def has_room(folder: Path) -> bool:
    """Whether `folder` takes a write of PROBE_BYTES now: False when it answers ENOSPC (or a
    quota's EDQUOT); any other error is not a full disk (the run itself will say what it is)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".room-", dir=folder)
        os.close(handle)
    except OSError as exc:
        return not is_no_space(exc)
    try:
        with open(name, "wb") as probe:
            probe.write(bytes(PROBE_BYTES))
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return not is_no_space(exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return True


def with_room(
    attempt: Callable[[], RunRecord], *, batch_id: str, approach: str, sink: EventSink,
    should_stop: Callable[[], bool], folder: Path | None = None,
) -> RunRecord:
    """`attempt()` (one configuration's run), run again after a pause whenever it ended while
    `folder` (the data dir) was full, or raised ENOSPC; its record once it ran with room."""
    where = (folder or settings.data_dir()).resolve()
    while True:
        try:
            record = attempt()
        except OSError as exc:
            if not is_no_space(exc):
                raise
            why = f"{exc.strerror or exc}"
        else:
            if record.status in _KEPT or has_room(where):
                return record
            why = os.strerror(errno.ENOSPC)
        if not _wait_for_room(where, why=why, batch_id=batch_id, approach=approach, sink=sink,
                              should_stop=should_stop):
            return attempt()  # stopped while paused: the run says so (skipped, or it raises)


def _wait_for_room(
    where: Path, *, why: str, batch_id: str, approach: str, sink: EventSink,
    should_stop: Callable[[], bool],
) -> bool:
    """Pause until `where` has room (True) or the batch is to stop (False)."""
    began = time.monotonic()
    reason = (f"the data dir {where} is full ({why}): {approach} runs again once space is "
              "freed")
    log.error("batch %s paused: %s", batch_id, reason)
    sink.emit(make_event("batch.paused", batch_id, cause="disk-full", approach=approach,
                         reason=reason))
    pause = FIRST_PAUSE_S
    while True:
        until = time.monotonic() + pause
        while (left := until - time.monotonic()) > 0:
            if should_stop():
                return False
            time.sleep(min(left, STOP_CHECK_S))
        if has_room(where):
            break
        pause = min(pause * 2, MAX_PAUSE_S)
    waited = time.monotonic() - began
    log.info("batch %s resumed: the data dir %s has room again after %.0f s", batch_id, where,
             waited)
    sink.emit(make_event("batch.resumed", batch_id, cause="disk-full", approach=approach,
                         after_s=round(waited, 1)))
    return True
