"""A timestamp too long to be a time is refused like any bad one (issue 20, item 6): 401 and one
log line per request, never a 500 with a traceback (a 400-digit number overflowed a float).

Real processes: a `specbench bot --http PORT` against the Slack stand-in, its log file measured.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bot.test_http_hardening import BotProcess, sign_bytes
from tests.builders import loopback_client
from tests.standin.slack_api import SlackStandin

REQUESTS = 5


@pytest.fixture
def bot_process(tmp_path: Path, demo_config: Path, standin: SlackStandin) -> Iterator[BotProcess]:
    proc = BotProcess(root=tmp_path, config=demo_config, api_url=standin.url)
    yield proc
    proc.stop()


@pytest.mark.parametrize("timestamp", ["9" * 400, "1" * 13, "9" * 5000])
def test_a_timestamp_of_hundreds_of_digits_is_401_with_one_log_line(
    bot_process: BotProcess, standin: SlackStandin, timestamp: str
) -> None:
    body = b"command=%2Fspecbench&text=help&user_id=U_ALICE&channel_id=C_LAB"
    headers = sign_bytes(body, timestamp=timestamp)  # signed with that very timestamp
    logged = bot_process.log_bytes()
    with loopback_client(timeout=10) as client:
        statuses = [client.post(f"http://127.0.0.1:{bot_process.port}/slack/events",
                                content=body, headers=headers).status_code
                    for _ in range(REQUESTS)]
    assert statuses == [401] * REQUESTS
    grown = bot_process.output().encode()[logged:].decode(errors="replace")
    said = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", "", grown, flags=re.M)  # a log
    assert "Traceback" not in said and "500" not in said  # line's own clock may read ,500
    assert len(grown.splitlines()) <= REQUESTS, grown[-2000:]
    assert len(grown) < REQUESTS * 400, grown[-2000:]
    assert not standin.recorded("chat.postEphemeral")  # nothing was answered
