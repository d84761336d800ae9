"""Who runs a batch, and how a batch ends when its runner cannot end it (docs/contracts.md "Batch
lifecycle and limits": every batch ends).

A batch's runner holds its store lease (`jobs.store.leases`) under a name that says which
process it is, `host:pid:start:pidns:nonce` (`owner_name`; the format of jobs.broker.worker's
lease owners): a Celery worker while it runs the batch, an embedded dispatcher (`specbench run`,
`console`, an embedded bot) from the moment the batch is stored, for `EMBEDDED_LEASE_S`. On the
runner's host the start time tells a dead runner from a live one, across pid reuse.

- `settle(store)`: what every command that reads batches calls first (status, show, run,
  cancel, digest). In embedded mode no one can resume a batch whose runner died, so a queued or
  running batch whose runner was a process of this host that is gone is ended `failed`, the
  server process groups the dead runner left are killed (`jobs.engines.orphans`) and the reason
  says what happened. In distributed mode a live worker resumes it (its lease is free), as before.
- `finish_cancel`: after a cancel request, the batch ends whatever its runner does: a live
  runner has CANCEL_WAIT_S to stop it; a runner that is gone, or does not stop it, has it ended
  here, with the groups it left on this host killed.
- `stop_owned`: a process that owns embedded batches and must exit (a signal, the end of the
  command) ends them `cancelled` and stops their servers first.
- `end_batch`: the one way to end a batch from outside its run: configurations without a record
  are `skipped` (the one that was running `cancelled`), a report is built from the records with
  the reason under `ended`, then the state is set (only from a state that has not ended).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jobs import settings
from jobs.batches.execution import build_report, log_path
from jobs.batches.probing import probe_report
from jobs.core.plans import RunConfig
from jobs.core.records import RunRecord
from jobs.engines import orphans, procs
from jobs.engines.base import RunContext, now_iso, to_run_record, to_stored
from jobs.engines.pids import host
from jobs.ops import owners
from jobs.store import ACTIVE_STATES, TERMINAL_STATES, BatchRow, Store

EMBEDDED_LEASE_S = 366 * 24 * 3600.0  # longer than any batch: only its runner's death ends it
CANCEL_WAIT_S = 10.0  # a live runner's time to stop a cancelled batch itself
STOP_WAIT_S = 15.0  # an exiting process's time to stop its batches before it SIGKILLs
POLL_S = 0.2


@dataclass(frozen=True)
class Ended:
    """A batch ended here, and why."""

    batch: str
    state: str
    reason: str


owner_name = owners.process_owner  # a lease owner naming this process (see the docstring)


def dead_here(owner: str | None) -> str | None:
    """"runner pid N on host H died" when `owner` names a process of this host (and pid
    namespace) that no longer runs; None for a live one, one elsewhere, or no owner."""
    pid = owners.dead_pid(owner)
    return None if pid is None else f"runner pid {pid} on host {host()} died"


def gone_runner(row: BatchRow) -> str | None:
    """Why the batch's runner is known to be gone: dead on this host, or its lease lapsed (a
    worker elsewhere that stopped renewing it); None while it may still run."""
    dead = dead_here(row.lease_owner)
    if dead is not None or row.lease_owner is None:
        return dead
    expires = row.lease_expires_at
    if expires is not None and expires <= settings.utcnow():
        where = row.lease_owner.split(":")[0]
        return (f"its runner on host {where} stopped renewing its lease at "
                f"{expires.isoformat(timespec='seconds')}")
    return None


def settle(store: Store) -> list[Ended]:
    """End the batches whose embedded runner died on this host (embedded mode only)."""
    if settings.broker_url() is not None:
        return []  # a live worker takes a dead one's batch over (jobs.broker.worker)
    ended: list[Ended] = []
    for row in store.list_batches(states=ACTIVE_STATES):
        why = dead_here(row.lease_owner)
        if why is None:
            continue
        reason = why + _killed(orphans.kill_all_orphans())
        ended += end_batch(store, row, state="failed", reason=reason)
    return ended


def finish_cancel(store: Store, batch_id: str, *, by: str,
                  wait_s: float = CANCEL_WAIT_S) -> tuple[BatchRow | None, bool]:
    """After a cancel request: the batch's row once it has ended, and whether it was ended
    here (True) rather than by its runner."""
    deadline = time.monotonic() + wait_s
    while True:
        row = store.get_batch(batch_id)
        if row is None or row.state in TERMINAL_STATES:
            return row, False
        why = gone_runner(row)
        if why is not None or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    if why is None:
        why = f"its runner did not stop it within {wait_s:g} s"
    reason = f"cancelled by {by}; {why}" + _killed(orphans.kill_all_orphans())
    end_batch(store, row, state="cancelled", reason=reason)
    return store.get_batch(batch_id), True


def stop_owned(
    store: Store, batch_ids: Sequence[str], *, stop: threading.Event,
    busy: Callable[[], bool], hurried: Callable[[], bool], reason: str,
    wait_s: float = STOP_WAIT_S,
) -> None:
    """End this process's batches `cancelled` and stop their servers, before it exits: a queued
    one at once, the running one by its own run (`stop` set: its server stopped as for a
    cancel); when that takes over `wait_s` or `hurried()` says so, every server group this
    process runs is SIGKILLed. Whatever is still active then is ended here."""
    for batch_id in batch_ids:
        store.request_cancel(batch_id)
        row = store.get_batch(batch_id)
        if row is not None and row.state == "queued":
            end_batch(store, row, state="cancelled", reason=reason, only_from=("queued",))
    stop.set()
    deadline = time.monotonic() + wait_s
    killed = False
    while busy() and (not killed or time.monotonic() < deadline):
        if not killed and (hurried() or time.monotonic() >= deadline):
            procs.kill_live_groups()
            killed, deadline = True, time.monotonic() + 5.0
        time.sleep(0.05)
    procs.kill_live_groups()  # nothing outlives its owner, whatever its run is doing
    for batch_id in batch_ids:
        row = store.get_batch(batch_id)
        if row is not None and row.state in ACTIVE_STATES:
            end_batch(store, row, state="cancelled", reason=reason)
        elif row is not None and row.state == "cancelled" and row.error is None:
            store.set_state(batch_id, "cancelled", error=reason[:500], only_from=("cancelled",))


def end_batch(store: Store, row: BatchRow, *, state: str, reason: str,
              only_from: Sequence[str] = ACTIVE_STATES) -> list[Ended]:
    """End a batch from outside its run (see the module's docstring); what ended: the batch,
    and a sweep's confirmation still waiting on it. Nothing when it had already ended."""
    have = {r.approach for r in store.records(row.id)}
    fresh: list[tuple[int, RunRecord]] = []
    for index, config in enumerate(row.plan.configs):
        if config.approach not in have:
            status = "cancelled" if row.state == "running" and not fresh else "skipped"
            fresh.append((index, _unrun(row, config, status=status, why=reason)))
    store.put_records(fresh)
    report = (probe_report(row, host=row.host)  # a queued probe: no records, no verdicts
              if row.plan.is_probe else build_report(store.records(row.id), row.plan))
    report.update(state=state, ended=reason)
    if row.plan.confirms is not None:
        report["confirms"] = row.plan.confirms
    if not store.end(row.id, state, report=report, error=reason[:500], only_from=only_from):
        return []  # it ended meanwhile: its state and report stand
    ended = [Ended(batch=row.id, state=state, reason=reason)]
    for other in store.list_batches(states=ACTIVE_STATES):
        if other.plan.confirms == row.id:
            ended += end_batch(store, other, state=state,
                               reason=f"its sweep batch {row.id} ended: {reason}")
    return ended


def _unrun(row: BatchRow, config: RunConfig, *, status: str, why: str) -> RunRecord:
    """The record of a configuration that will not run (any more): `status`, `why` as its
    log tail."""
    ctx = RunContext(batch_id=row.id, plan=row.plan, log_path=log_path(row.id, config.approach),
                     fingerprint={}, on_phase=lambda *_: None, should_stop=lambda: True)
    record = to_run_record(config, ctx, status=status, started_at=now_iso(), log_tail=why)
    return to_stored(record, row.plan)


def _killed(pgids: list[int]) -> str:
    if not pgids:
        return ""
    groups = ", ".join(str(p) for p in pgids)
    return f"; its process group{'s' if len(pgids) > 1 else ''} {groups} killed"
