"""A chat process's store calls, never on its event loop, waiting out an outage.

The event loop acks Slack within its 3 s: a store call made on it would hold every ack for as
long as the database takes, and a hung database takes as long as the connection's timeouts allow
(jobs.store.connections). So every store call of a thread runs on the `STORE_THREADS` pool
(`off_loop`), and `patiently` retries one that failed for an outage with jobs.store.outage's
pauses (0.5, 1, 2, 4, then every 5 s) until it answers or the thread is cancelled; any other
error is raised as before. The store is the thread's memory (what it posted, whether the batch
ended): a thread that gave up on an outage would leave its summary to the next bot start.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jobs.store.outage import FIRST_PAUSE_S, Outage, describe, is_outage, next_pause

__all__ = ["FIRST_PAUSE_S", "STORE_THREADS", "Outage", "describe", "is_blip", "next_pause",
           "off_loop", "patiently"]

T = TypeVar("T")
is_blip = is_outage  # the name the chat surfaces know it by

# Enough for every thread's store call and a few commands at once; each one is bounded by the
# connection's timeouts, so a hung database holds a thread for that long at most.
STORE_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="specbench-store")


async def off_loop(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)` on the store's threads: the event loop goes on while it waits."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(STORE_THREADS, functools.partial(call, *args))


async def patiently(call: Callable[[], T], *, what: str) -> T:
    """`call()` off the event loop, retried with backoff while the database is unreachable."""
    outage = Outage(what)
    while True:
        try:
            result = await off_loop(call)
        except Exception as exc:
            await asyncio.sleep(outage.failed(exc))
            continue
        outage.answered()
        return result
