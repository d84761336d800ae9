"""How the command line waits for a batch it started (`run`, `bisect`, `watch run`): submit it,
follow its events on stderr, print its report on stdout; the store is the truth when the end
event never comes (docs/contracts.md "Every batch ends")."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot import interrupts
from jobs.errors import InfraError, UserError

STORE_POLL_S = 3.0  # how often `run` asks the store whether its batch has ended
END_GRACE_S = 2.0  # the end event's head start once the store says the batch ended


def run_and_wait(ctx: Any, plan: Any, args: argparse.Namespace, *, trap: Any,
                  on_submitted: Any = None) -> int:
    """Submit, follow the batch's events on stderr, print its report on stdout.

    The store is the truth: it is polled every STORE_POLL_S, so that a batch whose end event
    never comes (Redis went away as it ended) still ends the wait, with the stored report.
    A stopping signal cancels the batch and waits up to STOP_WAIT_S for it to end (its report
    printed, exit 1); a second one, or a batch that does not stop, leaves the rest to
    `interrupts.close_context`. Once the batch is submitted the first signal is read by this
    loop (`trap.deferred`), wherever it lands: between an event and its line, in a read of the
    store, as the report is written."""
    import time

    from bot.cli.progress import ProgressBar
    from bot.thread.end_watch import EndWatch, is_end, stored_row
    from jobs.commands import run
    from jobs.core.messages import render_report

    bar = ProgressBar(sys.stderr)
    dispatcher = ctx.dispatcher
    trap.on_again(getattr(dispatcher, "hurry", lambda: None))
    subscription = dispatcher.subscribe()
    submitted = run.submit(ctx, plan).submitted
    batch_id = submitted.batch.id
    if on_submitted is not None:  # a watch's batch: the watch's last one
        on_submitted(batch_id)
    if submitted.live_workers == 0:
        bar.note(f"batch {batch_id} queued on {plan.queue!r}, which no live worker serves yet")
    deadline = time.monotonic() + args.timeout
    watch = EndWatch(poll_s=STORE_POLL_S, grace_s=END_GRACE_S, polled_at=time.monotonic())
    started = False
    interrupted = False
    report: dict[str, Any] | None = None
    row: Any = None
    with trap.deferred():
        try:
            while True:
                if trap.count and not interrupted:
                    interrupted = True
                    bar.note(f"interrupted by {trap.signal or 'SIGINT'}: cancelling batch "
                             f"{batch_id} and stopping its servers")
                    dispatcher.cancel(batch_id)
                    deadline = min(deadline, time.monotonic() + interrupts.STOP_WAIT_S)
                event = subscription.get(timeout=min(0.5, max(deadline - time.monotonic(), 0)))
                if interrupted and (trap.count > 1 or time.monotonic() >= deadline):
                    raise InfraError(f"{trap.reason}: batch {batch_id} did not stop in time; "
                                     "killing its servers")
                if event is not None and event.get("batch") == batch_id:
                    started = started or event["type"] != "batch.queued"
                    bar.on_event(event)
                    if is_end(event):
                        report = event.get("report")
                        break
                    continue
                now = time.monotonic()
                if watch.poll_due(now):
                    row = watch.saw(stored_row(dispatcher.store, batch_id), now)
                    started = started or (row is not None and row.state != "queued")
                if watch.store_says_ended(now):
                    assert watch.row is not None
                    bar.note(f"batch {batch_id} ended {watch.row.state} (from the store: its end "
                             "event did not come)")
                    report = watch.row.report
                    break
                if now >= deadline:
                    if not started:
                        dispatcher.cancel(batch_id)
                        raise InfraError(
                            f"no worker picked batch {batch_id} up within {args.timeout:g} s"
                        )
                    raise InfraError(f"batch {batch_id} did not finish within {args.timeout:g} s")
        finally:
            subscription.close()
            bar.close()
        if report is None:
            row = dispatcher.store.get_batch(batch_id)
            if row is not None and row.state == "refused":  # the worker's preflight: bad input
                raise UserError(f"batch {batch_id} refused: {row.error}")
            raise InfraError(f"batch {batch_id} ended {row.state if row else 'unknown'} "
                             f"without a report: {row.error if row else ''}")
        sys.stdout.write(render_report(report, args.format))
        return 1 if trap.count else 0  # a signal the loop had no time to act on too
