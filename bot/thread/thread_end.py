"""The end of a batch's thread, exactly once across bot restarts.

The end is four kinds of part, each one a `Ledger` part recorded in the store as it succeeds:
the progress message's final edit, the summary (or why the batch ended), each upload (the chart,
a sweep's landscape and Pareto front, the run records) and the parent's edit to the headline. One
bot at a time holds the batch's summary claim; it renews the claim while it works, and a claim
held by a bot process that died on this host is taken over at once (jobs.ops.owners), one held
elsewhere once it lapses (`CLAIM_TTL_S`). A bot that meets a claim held by a live bot waits for it
to post, or to die. Slack refusing a part for good (`PartFailed`) leaves that part, and the
thread's posted mark, to the next start; the other parts are still done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bot.thread.ledger import ClaimLost, Ledger, PartFailed, marker
from bot.thread.messages import Message, render_message, upload_steps
from bot.thread.ports import EndingThread
from bot.thread.store_retry import describe, is_blip, patiently
from bot.thread.summary_message import summary_message, summary_uploads
from jobs.core.engine_info import engine_title
from jobs.ops.owners import is_dead_here
from jobs.store import TERMINAL_STATES, BatchRow

log = logging.getLogger(__name__)

CLAIM_POLL_S = 5.0  # how often a bot that met a live holder's claim looks again


async def finish_thread(thread: EndingThread) -> None:
    """Post the batch's end: each part not yet done, then the thread's posted mark."""
    hub, batch_id = thread.hub, thread.row.id
    store, durable = hub.dispatcher.store, hub.durable
    what = f"summary of {batch_id}"
    if durable and not await _claim(thread):
        thread.ack_rest()  # another bot posted it
        return
    try:
        row = await patiently(lambda: store.get_batch(batch_id), what=what) or thread.row
        thread.row = row
        thread.report = thread.report or row.report
        if thread.parent_ts is None:  # a batch that ended before its thread could open
            await thread.open()
        keep = (lambda: _keep_claim(thread)) if durable else None
        ledger = await Ledger.load(store if durable else None, batch_id, keep=keep)
        failed = await _post_parts(thread, ledger, row)
        if failed:
            log.error("batch %s: Slack refused %s for good; the rest of its end is posted and "
                      "these parts are tried again at the next start", batch_id,
                      "; ".join(failed))
            if durable:
                await _release_claim(thread)
            return
        if durable:
            await patiently(lambda: store.mark_summary_posted(batch_id), what=what)
        thread.ack_rest()
    except ClaimLost:
        log.warning("batch %s: another bot took over its summary claim; it finishes the thread",
                    batch_id)
    except BaseException:
        if durable:
            await asyncio.shield(_release_claim(thread))
        raise


async def _post_parts(thread: EndingThread, ledger: Ledger, row: BatchRow) -> list[str]:
    """Every part not yet done, in order; the parts Slack refused for good."""
    poster, channel, batch_id = thread.hub.poster, thread.channel, row.id
    parent = thread.parent_ts
    assert parent is not None and thread.progress_ts is not None
    state = row.state if row.state in TERMINAL_STATES else "done"
    failed: list[str] = []

    async def once(part: str, attempt: Callable[[], Awaitable[str | None]],
                   find: Callable[[], Awaitable[str | None]] | None = None) -> None:
        try:
            await ledger.once(part, attempt, find=find)
        except PartFailed as exc:
            failed.append(str(exc))

    async def final_progress() -> str | None:
        await thread.final_progress(state)
        return thread.progress_ts

    await once("progress", final_progress)
    ending = _ending(thread, row, state)
    if ending is not None:
        mark = marker(batch_id, "summary")
        message = replace(thread.scrub(ending), metadata=mark)

        async def post_summary() -> str | None:
            return await poster.post(channel=channel, thread_ts=parent, message=message)

        async def find_summary() -> str | None:
            return await poster.find_reply(channel=channel, thread_ts=parent, metadata=mark)

        await once("summary", post_summary, find_summary)
    if thread.report is not None:
        store = thread.hub.dispatcher.store
        records = await patiently(lambda: store.records(batch_id), what=f"summary of {batch_id}")
        for upload in summary_uploads(records, report=thread.report, batch_id=batch_id,
                                      plan=row.plan, redact=thread.redact):
            await once(f"upload:{upload.filename}", *upload_steps(
                poster, channel=channel, thread_ts=parent, upload=upload))

    async def edit_parent() -> str | None:
        ended = None if thread.report else state
        await poster.update(channel=channel, ts=parent,
                            message=thread.parent_message(ended=ended, error=row.error))
        return parent

    await once("parent", edit_parent)
    return failed


def _ending(thread: EndingThread, row: BatchRow, state: str) -> Message | None:
    """The summary, or why a batch without a report ended (refused, failed); None: nothing."""
    if thread.report is not None:
        return summary_message(thread.report, batch_id=row.id)
    if row.error and state in ("refused", "failed"):
        return render_message("batch_refused", batch=row.id, state=state, error=row.error,
                              host=row.host, engine=engine_title(row.engine))
    return None


async def _claim(thread: EndingThread) -> bool:
    """Take the batch's summary claim, waiting while a live bot holds it; False once the
    summary is posted (by whoever)."""
    hub, batch_id = thread.hub, thread.row.id
    store, what = hub.dispatcher.store, f"summary of {batch_id}"
    waited = False
    while True:
        if await patiently(lambda: store.claim_summary(batch_id, owner=hub.owner,
                                                       is_dead=is_dead_here), what=what):
            return True
        posts = await patiently(lambda: store.slack_posts(batch_id), what=what)
        if posts is None or posts.summary_posted_at is not None:
            return False
        if not waited:
            log.info("batch %s: another live bot holds its summary claim; waiting", batch_id)
            waited = True
        await asyncio.sleep(CLAIM_POLL_S)


async def _keep_claim(thread: EndingThread) -> None:
    """Renew the claim before each attempt; ClaimLost when another bot holds it now."""
    hub, batch_id = thread.hub, thread.row.id
    store = hub.dispatcher.store
    if not await patiently(lambda: store.renew_summary_claim(batch_id, owner=hub.owner),
                           what=f"summary of {batch_id}"):
        raise ClaimLost(batch_id)


async def _release_claim(thread: EndingThread) -> None:
    """Best effort: a claim left behind lapses by itself, or is taken over once we are dead."""
    hub, batch_id = thread.hub, thread.row.id
    try:
        await _off_loop(lambda: hub.dispatcher.store.release_summary_claim(
            batch_id, owner=hub.owner))
    except Exception as exc:
        if not is_blip(exc):
            raise
        log.warning("batch %s: could not release the summary claim (%s); it lapses", batch_id,
                    describe(exc))


async def _off_loop(call: Callable[[], object]) -> None:
    """`call()` off the event loop, once (no retry)."""
    await asyncio.get_running_loop().run_in_executor(None, call)
