"""The Slack HTTP bot against hostile requests: a body over the cap is refused with 413 without
being read or logged, a bad timestamp is 401, a signed body that does not parse is 400, and a
replayed `digest` is posted once. The 20 MB bodies go to a real `specbench bot --http` process
(its log file and its RSS are what is measured); the rest to the in-thread bot of conftest.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from bot.slack.http import MAX_BODY_BYTES
from tests.bot.conftest import (
    BOT_TOKEN,
    SIGNING_SECRET,
    BotServer,
    free_port,
)
from tests.builders import loopback_get
from tests.standin.slack_api import SlackStandin

REPO = Path(__file__).resolve().parents[2]
MARKER = b"BODY-MARKER-7c1e"  # in every hostile body: must never reach a log
TWENTY_MB = 20 * 1024 * 1024


class BotProcess:
    """A `specbench bot --http PORT` process (embedded mode) against the Slack stand-in."""

    def __init__(self, *, root: Path, config: Path, api_url: str) -> None:
        self.port = free_port()
        self.log = root / f"bot-{time.monotonic_ns()}.log"
        self._out = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECBENCH_", "SLACK_"))}
        env.update(SPECBENCH_DATA_DIR=str(root / "data"), SPECBENCH_CONFIG_DIR=str(config),
                   SPECBENCH_DIGEST_SCHEDULE="off", SLACK_BOT_TOKEN=BOT_TOKEN,
                   SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=api_url,
                   PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "bot", "--http", str(self.port)],
            env=env, cwd=REPO, stdout=self._out, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the bot did not start: {self.output()[-2000:]!r}")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/healthz"
            return loopback_get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def rss_mib(self, field: str = "VmRSS") -> float:
        """The process's resident memory now (VmRSS) or at its peak (VmHWM), MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no {field}")

    def log_bytes(self) -> int:
        self._out.flush()
        return self.log.stat().st_size

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def send_raw(port: int, head: bytes, chunks: Iterable[bytes], *,
             timeout: float = 30.0) -> tuple[int | None, int]:
    """POST over a raw socket, writing the body until the server answers (as a client that
    watches for an early response does); the response's status (None: no response) and the
    body bytes written."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(head)
        sent = 0
        readable, _, _ = select.select([sock], [], [], 0.5)  # an answer to the headers alone
        if not readable:
            for chunk in chunks:
                readable, writable, _ = select.select([sock], [sock], [], timeout)
                if readable or not writable:
                    break
                try:
                    sock.sendall(chunk)
                except OSError:
                    break
                sent += len(chunk)
        answer = b""
        try:
            while b"\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except OSError:
            pass
        status = int(answer.split()[1]) if answer.startswith(b"HTTP/") else None
        return status, sent
    finally:
        sock.close()


def unsigned_head(*, port: int, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0=00\r\n"
            f"{framing}\r\n\r\n").encode()


def body_chunks(total: int, *, chunked: bool, size: int = 64 * 1024) -> Iterator[bytes]:
    piece = (MARKER + b"x" * size)[:size]
    for _ in range(total // size):
        yield f"{size:x}\r\n".encode() + piece + b"\r\n" if chunked else piece
    if chunked:
        yield b"0\r\n\r\n"


def post_twenty_mb(port: int, *, chunked: bool) -> tuple[int | None, int]:
    head = unsigned_head(port=port, length=None if chunked else TWENTY_MB)
    return send_raw(port, head, body_chunks(TWENTY_MB, chunked=chunked))


@pytest.fixture
def bot_process(tmp_path: Path, demo_config: Path, standin: SlackStandin) -> Iterator[BotProcess]:
    proc = BotProcess(root=tmp_path, config=demo_config, api_url=standin.url)
    yield proc
    proc.stop()


@pytest.mark.timeout(90)
def test_a_20_mb_body_is_refused_unread_and_unlogged(bot_process: BotProcess) -> None:
    rss, peak = bot_process.rss_mib(), bot_process.rss_mib("VmHWM")
    logged = bot_process.log_bytes()
    status, sent = post_twenty_mb(bot_process.port, chunked=False)
    assert status == 413
    assert sent == 0  # refused on its Content-Length, before a byte of the body
    status, sent = post_twenty_mb(bot_process.port, chunked=True)  # no length: read to the cap
    assert status == 413
    assert sent < TWENTY_MB // 2
    growth_mib = bot_process.rss_mib() - rss
    log = bot_process.output()
    assert bot_process.log_bytes() - logged < 4 * 1024, log[-3000:]
    assert MARKER.decode() not in log
    assert growth_mib < 16, f"RSS grew {growth_mib:.1f} MiB"
    assert bot_process.rss_mib("VmHWM") - peak < 16
    assert "Traceback" not in log
    # the bot still answers
    assert loopback_get(f"http://127.0.0.1:{bot_process.port}/healthz").text == "ok"


def test_a_body_just_over_the_cap_is_413_and_one_at_it_is_read(bot: BotServer) -> None:
    over = bot.client.post(bot.url, content=b"x" * (MAX_BODY_BYTES + 1),
                           headers={"X-Slack-Request-Timestamp": str(int(time.time())),
                                    "X-Slack-Signature": "v0=00"})
    assert over.status_code == 413
    at = bot.client.post(bot.url, content=b"x" * MAX_BODY_BYTES,
                         headers={"X-Slack-Request-Timestamp": str(int(time.time())),
                                  "X-Slack-Signature": "v0=00"})
    assert at.status_code == 401  # read, then refused for its signature


def sign_bytes(body: bytes, *, timestamp: str | None = None) -> dict[str, str]:
    ts = timestamp or str(int(time.time()))
    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={mac.hexdigest()}",
            "Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("timestamp", ["abc", "12.5", "", "-17", "1e9", "0x10"])
def test_a_bad_timestamp_is_401(bot: BotServer, standin: SlackStandin, timestamp: str,
                                caplog: pytest.LogCaptureFixture) -> None:
    body = b"command=%2Fspecbench&text=help&user_id=U_ALICE&channel_id=C_LAB&" + MARKER
    headers = {**sign_bytes(body), "X-Slack-Request-Timestamp": timestamp}
    with caplog.at_level(logging.DEBUG):
        answer = bot.client.post(bot.url, content=body, headers=headers)
    assert answer.status_code == 401
    assert MARKER.decode() not in caplog.text and "Traceback" not in caplog.text


@pytest.mark.parametrize("body,content_type", [
    (b"\xff\xfe\x00text=help", "application/x-www-form-urlencoded"),
    (b"payload=%7Bnot+json", "application/x-www-form-urlencoded"),
    (b"{\"type\": ", "application/json"),
    (b"[1, 2, 3]", "application/json"),
    (b"payload=%5B1%5D", "application/x-www-form-urlencoded"),
])
def test_a_malformed_signed_body_is_400(bot: BotServer, body: bytes, content_type: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    headers = {**sign_bytes(body), "Content-Type": content_type}
    with caplog.at_level(logging.DEBUG):
        answer = bot.client.post(bot.url, content=body, headers=headers)
    assert answer.status_code == 400
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("signature", [b"v0=" + b"0" * 64, b"v0=\xe9\xff", b""])
def test_a_bad_signature_is_401_and_its_body_is_not_logged(
    bot: BotServer, caplog: pytest.LogCaptureFixture, signature: bytes
) -> None:
    body = b"command=%2Fspecbench&text=help&" + MARKER
    with caplog.at_level(logging.DEBUG):
        answer = bot.client.post(bot.url, content=body, headers={
            **sign_bytes(body), "X-Slack-Signature": signature})  # type: ignore[dict-item]
    assert answer.status_code == 401
    assert MARKER.decode() not in caplog.text and "Traceback" not in caplog.text


def test_bolts_invalid_signature_line_loses_the_body(bot: BotServer) -> None:
    """Bolt's own check stays behind ours; should it ever log, the body is not in the line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    bolt = logging.getLogger("slack_bolt.AsyncRequestVerification")
    bolt.addHandler(handler)
    level = bolt.level
    bolt.setLevel(logging.INFO)
    try:
        bolt.info("Invalid request signature detected (signature: %s, timestamp: %s, body: %s)",
                  "v0=1", "2", MARKER.decode())
    finally:
        bolt.removeHandler(handler)
        bolt.setLevel(level)
    assert "Invalid request signature" in stream.getvalue()
    assert MARKER.decode() not in stream.getvalue()


def test_a_valid_signed_command_still_works(bot: BotServer, standin: SlackStandin) -> None:
    assert bot.command("help").status_code == 200
    calls = standin.wait_for(lambda cs: any(c.method == "chat.postEphemeral" for c in cs))
    answer = next(c for c in calls if c.method == "chat.postEphemeral")
    assert "run PRESET" in answer.body["text"] or answer.body.get("blocks")


def digests(standin: SlackStandin) -> list[object]:
    return [c for c in standin.recorded("chat.postMessage") if "igest" in str(c.body)]


def test_a_replayed_digest_is_posted_once(bot: BotServer, standin: SlackStandin) -> None:
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    for headers in (None, None, retry, retry):
        assert bot.command("digest", trigger="tr-digest-1", headers=headers).status_code == 200
    standin.wait_for(lambda cs: digests(standin))
    time.sleep(1.0)
    assert len(digests(standin)) == 1
    assert bot.command("digest", trigger="tr-digest-2").status_code == 200  # a new command
    standin.wait_for(lambda cs: len(digests(standin)) == 2)


def test_third_party_loggers_stay_at_warning_and_long_messages_are_cut() -> None:
    from jobs.ops.logs import MAX_MESSAGE_CHARS, THIRD_PARTY, configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in THIRD_PARTY}
    stream = io.StringIO()
    try:
        configure_logging(json=False, stream=stream)
        for name in ("slack_bolt", "slack_sdk.web", "urllib3", "celery", "kombu", "sqlalchemy",
                     "asyncio"):
            assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING, name
        assert logging.getLogger("bot.slack.app").getEffectiveLevel() == logging.INFO
        assert logging.getLogger("jobs").getEffectiveLevel() == logging.INFO
        logging.getLogger("slack_bolt.AsyncApp").info("quoted body: %s", MARKER.decode())
        logging.getLogger("bot.slack.http").warning("huge: %s", "y" * 1_000_000)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
    out = stream.getvalue()
    assert MARKER.decode() not in out
    assert "huge:" in out and len(out) < MAX_MESSAGE_CHARS + 500
