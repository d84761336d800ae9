"""Issue 20's hung-database figure: the bot's ack time while its PostgreSQL hangs for 30 s.

A real `specbench bot --http` and `specbench worker` share one PostgreSQL database through a TCP
proxy (tests/standin/tcp_proxy.py); once the batch's baseline is stored the proxy hangs for 30 s
(connections accepted, nothing answered, open ones included), while signed `help` commands
arrive at 4 a second. Both processes run with the default database timeouts. Reported: the ack
p99 and slowest during the hang (Slack retries after 3 s), and how the batch ended. The scenario
is `tests/bot/test_db_hang.py`'s `run_outages`; it needs PostgreSQL on 127.0.0.1:5432 and Redis
on 127.0.0.1:6379, and removes what it made.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

HANG_S = 30.0
RATE_HZ = 4.0


def run() -> dict[str, str]:
    from tests.bot.test_db_hang import run_outages

    root = Path(tempfile.mkdtemp(prefix="specbench-db-hang-"))
    try:
        outcome = run_outages(root, [("hang", HANG_S)], rate_hz=RATE_HZ, timeouts={})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    during = outcome.latencies("hang")
    failed = sum(a.status != 200 for a in outcome.acks)
    slow = sum(latency >= 3.0 for latency in outcome.latencies())
    return {
        "ack p99 during a 30 s database hang": f"{outcome.p99('hang') * 1000:.0f} ms "
                                               f"({len(during)} signed help commands)",
        "slowest ack during the hang": f"{max(during) * 1000:.0f} ms",
        "ack p99 over the whole batch": f"{outcome.p99() * 1000:.0f} ms "
                                        f"({len(outcome.acks)} commands, {slow} over 3 s, "
                                        f"{failed} not 200)",
        "help answered": f"{outcome.help_answers} of {len(outcome.acks)}; during the hang "
                         f"{outcome.answered_during('hang')} answers for {len(during)} sent",
        "the running batch": f"{outcome.row.state}, {len(outcome.records)} configurations "
                             f"stored, {outcome.summaries} summary posted",
    }
