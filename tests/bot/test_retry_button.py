"""A double-clicked Retry starts one batch (issue 20, item 6): a launch button's clicks share the
button's key, which the store keeps as it keeps a `run`'s, and the second click is told which
batch the first one started. The bot runs for real (uvicorn + Bolt) behind signed requests.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.store import TERMINAL_STATES
from tests.bot.conftest import BotServer
from tests.bot.test_slack_app import wait_done
from tests.standin.slack_api import SlackStandin


def wait_batches(dispatcher: EmbeddedDispatcher, count: int, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(dispatcher.store.list_batches()) < count:
        assert time.monotonic() < deadline, f"fewer than {count} batches"
        time.sleep(0.05)


def wait_all_ended(dispatcher: EmbeddedDispatcher, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while any(r.state not in TERMINAL_STATES for r in dispatcher.store.list_batches()):
        assert time.monotonic() < deadline, "a batch did not end"
        time.sleep(0.05)


def ephemerals_to(standin: SlackStandin, user: str) -> list[str]:
    return [c.body.get("text", "") for c in standin.recorded("chat.postEphemeral")
            if c.body.get("user") == user]


def test_a_double_clicked_retry_starts_one_batch(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    bot.command("run demo")
    first = wait_done(dispatcher)
    with ThreadPoolExecutor(2) as pool:  # both clicks in flight at once
        clicks = list(pool.map(lambda _: bot.click("specbench_retry", f"{first} faster"),
                               range(2)))
    assert [c.status_code for c in clicks] == [200, 200]
    wait_batches(dispatcher, 2)
    standin.wait_for(lambda _: any("already submitted" in t
                                   for t in ephemerals_to(standin, "U_ALICE")))
    bot.click("specbench_retry", f"{first} faster", user="U_BOB")  # someone else, same button
    standin.wait_for(lambda _: any("already submitted" in t
                                   for t in ephemerals_to(standin, "U_BOB")))
    wait_all_ended(dispatcher)
    rows = dispatcher.store.list_batches()
    assert len(rows) == 2, [r.id for r in rows]
    retried = next(r for r in rows if r.id != first)
    assert [c.approach for c in retried.plan.configs] == ["baseline", "faster"]
    assert any(retried.id in t for t in ephemerals_to(standin, "U_BOB"))
    # the button is one launch; typing `retry` starts another, as a new command does
    bot.command(f"retry {first} faster")
    wait_batches(dispatcher, 3)
    wait_all_ended(dispatcher)
