"""The bot's durable event feed in distributed mode: the Redis Stream read through a consumer
group, so that events a dead or stopped bot never handled go to the next one.

One group, `specbench-bot`, for every bot process; each process is a consumer named after its
host and PID. A new process reads what the group has not been given yet; what a dead process was
given but never acknowledged is claimed after `CLAIM_IDLE_S` (and a restarted bot's store
catch-up has already posted what mattered: the summary). Consumers left with nothing pending by
processes long gone are removed at start-up.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from jobs.batches.dispatch import Dispatcher

log = logging.getLogger(__name__)

GROUP = "specbench-bot"
CLAIM_IDLE_S = 30.0  # longer than any thread takes to handle an event, summary included
STALE_CONSUMER_MS = 24 * 3600 * 1000


def consumer_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def open_feed(dispatcher: Dispatcher, *, group: str = GROUP) -> Any:
    """A `StreamReader` over the dispatcher's broker in distributed mode; None when embedded
    (the in-process channel dies with the process: nothing to resume)."""
    url = getattr(dispatcher, "url", None)
    if dispatcher.mode != "distributed" or not url:
        return None
    import redis

    from jobs.broker.streams import StreamReader, connect
    from jobs.errors import BrokerError

    client = connect(url)
    try:
        # "$": the group, made by the first bot ever, starts from now; the store's catch-up
        # covers any thread older than that.
        reader = StreamReader(client, group=group, consumer=consumer_name(), start="$",
                              claim_idle_s=CLAIM_IDLE_S)
    except (redis.RedisError, OSError) as exc:
        client.close()
        raise BrokerError.unreachable(url, exc) from None
    _forget_stale_consumers(client, group)
    return reader


def _forget_stale_consumers(client: Any, group: str) -> None:
    from jobs.broker.streams import STREAM

    try:
        for consumer in client.xinfo_consumers(STREAM, group):
            name = consumer.get("name")
            if consumer.get("pending") == 0 and consumer.get("idle", 0) > STALE_CONSUMER_MS:
                client.xgroup_delconsumer(STREAM, group, name)
    except Exception:  # noqa: BLE001 - housekeeping only
        log.debug("could not prune the stream's stale consumers", exc_info=True)
