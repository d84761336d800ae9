"""A confirmed watch change bisected over the host's stacks, from the beat (docs/contracts.md
"Stacks", bisect): what the alert says of it, and the bisection started once.

The worker that confirmed the change kept where it lies among its host's stacks (the change's
`span`: the stacks between its last good and first bad point, or what a bisection would need).
With stacks between, the beat starts the bisection (`jobs.commands.bisect.start_for_change`)
before it posts the alert, which names its batch. The start is a part recorded in the store as
the thread's messages are (bot.thread.ledger: scope `watch-change:<id>`, part `bisect`, the
batch's id as its reference) and the batch is keyed by the change, so a tick delivered twice, or a
beat restarted in the middle, starts it once.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from bot.thread.ledger import Ledger
from jobs.commands.bisect import start_for_change
from jobs.commands.context import Context
from jobs.core.watch import DISMISSED, Change, WatchRow
from jobs.errors import UserError
from jobs.store import Store

START, RESULT = "bisect", "bisect-result"  # the change's parts: the start, the result's message
REFUSED = "refused: "  # a start's reference when the bisection was refused
MAX_REF = 255  # what a part's reference holds


def scope_of(change: Change) -> str:
    return f"watch-change:{change.id}"


async def bisecting(ctx: Context | None, store: Store, watch: WatchRow,
                    change: Change) -> dict[str, Any] | None:
    """What the alert says of a bisection, starting it first where the host has stacks between:
    `{"batch", "from", "to", "stacks", "max_batches"}` once started, `{"from", "to", "needs"}`
    with none between, `{"why"}` when none can run; None when there is nothing to say (no stack
    explains the change, or someone dismissed it first) or no one to start it (`ctx` None). An
    infrastructure failure (the broker away) is raised: the next tick tries again."""
    span = change.data.get("span")
    if not isinstance(span, dict) or change.state == DISMISSED:  # "not a regression" already
        return None
    if span.get("error"):
        return {"why": str(span["error"])}
    stacks = list(span.get("stacks") or [])
    if not stacks:
        return {"from": span.get("from"), "to": span.get("to"), "needs": span.get("needs")}
    if ctx is None:
        return None

    async def start() -> str:
        try:
            started = await asyncio.to_thread(start_for_change, ctx, watch, change)
        except UserError as exc:  # the preset or its approach changed since: said, once
            return (REFUSED + str(exc))[:MAX_REF]
        return started.submitted.batch.id

    ledger = await Ledger.load(store, scope_of(change))
    ref = await ledger.once(START, start)
    if ref is None:
        return None
    if ref.startswith(REFUSED):
        return {"why": ref.removeprefix(REFUSED)}
    return {"batch": ref, "from": span.get("from"), "to": span.get("to"), "stacks": stacks,
            "max_batches": math.ceil(math.log2(len(stacks) + 1))}
