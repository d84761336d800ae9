"""Slack's "Re-run anyway" on a known dead end's line, and Show logs within the allow-lists."""

from __future__ import annotations

import json
import time

from bot.chat.router import Access
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.core.messages import summary_payload
from jobs.store import TERMINAL_STATES
from tests.bot.conftest import BotServer, start_bot
from tests.bot.test_slack_app import wait_done
from tests.standin.slack_api import SlackStandin


def test_a_known_dead_end_gets_a_re_run_anyway_button() -> None:
    report = {
        "batch": "b-2", "preset": "mem", "metric": "output_throughput", "lower_is_better": False,
        "min_effect_pct": 2.0, "baseline": {"approach": "baseline", "value": 80.0,
                                            "status": "ok"},
        "results": [{"approach": "symm-mem", "verdict": "failed", "cause": "arch-unsupported",
                     "value": None, "delta_pct": None, "vs_parent": None, "break_even": None,
                     "why": "known from b-1: the GPU cannot run it", "hypothesis": "",
                     "parent": None, "samples": [], "accept_length": None}],
        "key_achievement": None, "root_cause": None, "next_steps": [], "fingerprint": {},
        "counts": {"failed": 1},
    }
    blocks = summary_payload(report)["blocks"]
    [button] = [b["accessory"] for b in blocks if b.get("accessory")]
    assert button["action_id"] == "specbench_rerun_known" and button["value"] == "b-2 symm-mem"
    report["results"][0]["why"] = "the GPU cannot run it"
    assert not [b for b in summary_payload(report)["blocks"] if b.get("accessory")]


def test_re_run_anyway_retries_the_approach_with_rerun_known(
    bot: BotServer, standin: SlackStandin, dispatcher: EmbeddedDispatcher
) -> None:
    bot.command("run demo")
    first = wait_done(dispatcher)
    bot.click("specbench_rerun_known", f"{first} broken")
    deadline = time.monotonic() + 60
    while len(dispatcher.store.list_batches()) < 2:
        assert time.monotonic() < deadline, "the click started nothing"
        time.sleep(0.05)
    retried = next(r for r in dispatcher.store.list_batches() if r.id != first)
    assert retried.plan.rerun_known is True
    assert [c.approach for c in retried.plan.configs] == ["baseline", "broken"]
    while dispatcher.store.get_batch(retried.id).state not in TERMINAL_STATES:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_show_logs_is_refused_off_the_allow_list(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin
) -> None:
    server = start_bot(dispatcher, standin, access=Access(users=frozenset({"U_ALICE"})))
    try:
        server.command("run demo")
        batch = wait_done(dispatcher)
        server.click("specbench_logs", batch, user="U_MALLORY")
        calls = standin.wait_for(lambda cs: any(
            c.method == "chat.postEphemeral" and c.body.get("user") == "U_MALLORY" for c in cs))
    finally:
        server.stop()
    [answer] = [c for c in calls if c.method == "chat.postEphemeral"
                and c.body.get("user") == "U_MALLORY"]
    assert "refused" in answer.body["text"] and "OutOfMemory" not in json.dumps(answer.body)
