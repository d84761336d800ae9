"""What a Slack delivery says about itself: the key a retried delivery reproduces, whether it is
a retry, and who clicked which button (bot.slack.app's handlers read them).

A command is keyed by its trigger_id, an event by its event_id; a launch button (Retry, Re-run
anyway) by the button, not the click, so that a double click starts one batch.
"""

from __future__ import annotations

import hashlib
from typing import Any

from slack_bolt.request.async_request import AsyncBoltRequest


def idempotency_key(*parts: Any) -> str:
    """A key that a retried delivery of the same request reproduces."""
    raw = "\x1f".join(str(p) for p in parts)
    return "slack:" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def retry_num(request: AsyncBoltRequest) -> int:
    """Slack's X-Slack-Retry-Num (0 for a first delivery or a header that is no number)."""
    values = request.headers.get("x-slack-retry-num") or ["0"]
    try:
        return int(values[0])
    except ValueError:
        return 0


def is_redelivery(request: AsyncBoltRequest, unique_id: Any) -> bool:
    """Whether a delivery whose key was seen is dropped: always when the key holds Slack's
    unique ID of the request (a trigger_id, an event_id), else when Slack says it retries."""
    return bool(unique_id) or retry_num(request) > 0


def button_value(body: dict[str, Any]) -> str:
    """The clicked button's value (a batch ID, or "BATCH APPROACH")."""
    return str(body["actions"][0].get("value", ""))


def to_click(body: dict[str, Any]) -> dict[str, Any]:
    """A click as `SpecbenchBot.handle`'s keywords: the clicker, the channel, the thread, and a
    key of this click (a retried delivery of it is dropped)."""
    message = body.get("message") or {}
    return {
        "user": body["user"]["id"], "channel": body["channel"]["id"],
        "key": idempotency_key(body.get("trigger_id"), body["actions"][0].get("action_ts")),
        "thread_ts": message.get("thread_ts") or message.get("ts"), "button": True,
    }


def to_launch(body: dict[str, Any]) -> dict[str, Any]:
    """A launch button's click (Retry, Re-run anyway): keyed by the button itself (the message
    it is on, its action and value), not by the click, so that a double click, or a second
    person's click, finds the batch the first one started instead of starting another (the
    store keeps the key, as for `run`)."""
    message_ts = ((body.get("message") or {}).get("ts")
                  or (body.get("container") or {}).get("message_ts"))  # an ephemeral message's
    action = body["actions"][0]
    return {**to_click(body), "key": idempotency_key(
        (body.get("team") or {}).get("id"), body["channel"]["id"], message_ts,
        action.get("action_id"), action.get("value"))}
