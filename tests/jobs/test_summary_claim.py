"""The summary claim names its holder: a holder process that died on this host loses it at once
(no 5-minute wait), a live one keeps it until it lapses, and parts are recorded once done."""

from __future__ import annotations

import subprocess
import sys

from jobs.ops.owners import is_dead_here, process_owner
from jobs.store import Store
from tests.conftest import make_plan


def dead_owner() -> str:
    """The holder name of a real process that has exited."""
    code = "from jobs.ops.owners import process_owner; print(process_owner())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


def test_a_dead_holders_claim_is_taken_at_once_and_a_live_ones_is_not() -> None:
    store = Store()
    store.create_batch(batch_id="b-1", preset="p", engine="local", queue="q",
                       requested_by="u", plan=make_plan())
    gone = dead_owner()
    assert is_dead_here(gone) and not is_dead_here(process_owner())
    assert store.claim_summary("b-1", ttl_s=300, owner=gone)
    me = process_owner()
    assert store.claim_summary("b-1", owner=me, is_dead=is_dead_here)  # no wait for 300 s
    other = process_owner()  # this process again: alive, so its claim stands
    assert not store.claim_summary("b-1", owner=other, is_dead=is_dead_here)
    assert store.renew_summary_claim("b-1", owner=me)
    assert not store.renew_summary_claim("b-1", owner=other)


def test_a_part_done_stays_done() -> None:
    store = Store()
    store.begin_part("b-2", "summary")
    assert store.slack_parts("b-2")["summary"].state == "pending"
    store.finish_part("b-2", "summary", "1.5")
    store.begin_part("b-2", "summary")  # a late attempt never undoes it
    part = store.slack_parts("b-2")["summary"]
    assert part.is_done and part.ref == "1.5"
