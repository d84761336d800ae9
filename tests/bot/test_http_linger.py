"""The 413 of a body over the cap reaches a client that is still sending (issue 19): the bot's
HTTP connection closes with a linger (bot/slack/linger.py), so a real client that writes its
whole 20 MB body before reading (http.client, as most clients do) reads the 413, not a reset;
the rest of the body is thrown away, not held; a client that sends for ever is cut after
`LINGER_SECONDS` or `LINGER_BYTES`; and the bot answers others all the while. Against a real
`specbench bot --http PORT` process.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.slack.linger import LINGER_BYTES, LINGER_SECONDS
from tests.bot.test_http_hardening import (
    MARKER,
    TWENTY_MB,
    BotProcess,
    body_chunks,
    unsigned_head,
)
from tests.builders import loopback_get
from tests.standin.slack_api import SlackStandin

UNSIGNED = {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=00",
            "Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def bot_process(tmp_path: Path, demo_config: Path, standin: SlackStandin) -> Iterator[BotProcess]:
    proc = BotProcess(root=tmp_path, config=demo_config, api_url=standin.url)
    yield proc
    proc.stop()


def post_with_http_client(port: int, *, chunked: bool) -> tuple[int, bytes]:
    """POST 20 MB with the standard library's client, which sends all of it before reading."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        if chunked:
            pieces = body_chunks(TWENTY_MB, chunked=False)
            conn.request("POST", "/slack/events", body=pieces, headers=UNSIGNED,
                         encode_chunked=True)
        else:
            conn.request("POST", "/slack/events", body=(MARKER + b"x" * TWENTY_MB)[:TWENTY_MB],
                         headers=UNSIGNED)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def healthy(port: int) -> bool:
    return loopback_get(f"http://127.0.0.1:{port}/healthz", timeout=5).text == "ok"


@pytest.mark.timeout(120)
def test_a_client_that_sends_all_20_mb_first_reads_the_413(bot_process: BotProcess) -> None:
    rss, logged = bot_process.rss_mib(), bot_process.log_bytes()
    for chunked in (False, True, False):
        # a cut before the client has sent all 20 MB resets its send: the 413 read proves the
        # bot drained them all
        status, body = post_with_http_client(bot_process.port, chunked=chunked)
        assert (status, body) == (413, b"request body too large"), chunked
        assert healthy(bot_process.port)
    assert bot_process.rss_mib() - rss < 16  # the drained bytes were thrown away, not held
    log = bot_process.output()
    assert bot_process.log_bytes() - logged < 4 * 1024, log[-3000:]
    assert MARKER.decode() not in log and "Traceback" not in log


def send_until_cut(port: int, *, pause_s: float, result: dict[str, object],
                   draining: threading.Event | None = None,
                   cut: threading.Event | None = None) -> None:
    """Send a body that never ends (64 KiB, then `pause_s`, and again): the answer read after
    the head (`draining` set then), the bytes sent, whether the bot cut us (`cut` set then) and
    the seconds from before the head was sent until it did: no fewer than the bot's own, however
    busy the machine, since its linger starts after the head arrived."""
    draining, cut = draining or threading.Event(), cut or threading.Event()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        began = time.monotonic()
        sock.sendall(unsigned_head(port=port, length=1 << 40))
        answer = b""
        while data := sock.recv(65536):  # to the end of file: the bot shut its write side
            answer += data
        result["answer"] = answer
        draining.set()
        answered, sent = time.monotonic(), 0
        piece = b"y" * (64 * 1024)
        while time.monotonic() - answered < LINGER_SECONDS + 60:
            try:
                sock.sendall(piece)
            except OSError:
                cut.set()
                break
            sent += len(piece)
            time.sleep(pause_s)
        result["sent"], result["cut"] = sent, cut.is_set()
        result["cut_after_s"] = time.monotonic() - began
    finally:
        sock.close()


@pytest.mark.timeout(120)
def test_a_client_that_sends_for_ever_is_cut_and_the_bot_stays_responsive(
    bot_process: BotProcess,
) -> None:
    slow: dict[str, object] = {}
    draining, cut = threading.Event(), threading.Event()
    sender = threading.Thread(target=send_until_cut, args=(bot_process.port,), kwargs={
        "pause_s": 0.05, "result": slow, "draining": draining, "cut": cut})
    sender.start()
    answered_while_draining = 0
    while sender.is_alive():  # the bot answers others while it drains
        asked_while_draining = draining.is_set()
        assert healthy(bot_process.port)
        answered_while_draining += asked_while_draining and not cut.is_set()
        time.sleep(0.5)
    sender.join()
    # a bot that drained instead of serving would answer one request at most, after the cut
    assert answered_while_draining >= 2, answered_while_draining
    assert str(slow["answer"]).startswith("b'HTTP/1.1 413"), slow
    assert str(slow["answer"]).endswith("request body too large'"), slow
    # ~1.3 MB/s stays far under LINGER_BYTES: the time limit cut it, not before it was due
    assert slow["cut"] and int(slow["sent"]) < LINGER_BYTES, slow  # type: ignore[call-overload]
    assert float(slow["cut_after_s"]) >= LINGER_SECONDS - 0.05, slow  # type: ignore[arg-type]

    fast: dict[str, object] = {}
    send_until_cut(bot_process.port, pause_s=0.0, result=fast)  # as fast as it can
    assert str(fast["answer"]).startswith("b'HTTP/1.1 413"), fast
    # cut once LINGER_BYTES were thrown away (or at the time limit on a slow machine); what
    # the kernels' buffers took besides is the margin
    assert fast["cut"] and int(fast["sent"]) < LINGER_BYTES + (32 << 20), fast  # type: ignore[call-overload]
    assert healthy(bot_process.port)
    assert "Traceback" not in bot_process.output()
