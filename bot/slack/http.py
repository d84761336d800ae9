"""The bot's HTTP mode (`specbench bot --http PORT`): its Bolt app behind Starlette, served by
uvicorn. POST /slack/events takes Slack's signed requests; GET /healthz answers `ok` (what
`python -m jobs.ops.health bot --http PORT` asks). The app's lifespan starts and stops the bot.

Before Bolt sees a request it is checked here, cheaply and without logging its body: a body over
`MAX_BODY_BYTES` is refused with 413 (at once when its Content-Length says so, else as soon as
that much has arrived: at most the cap and one chunk are held), a missing, non-numeric or stale
timestamp or a bad signature is 401, and a signed body that is not UTF-8 or does not parse is
400. Bolt's own check stays as a second line; its log line (which quotes the body) is cut.
A 413 sent before the body was read closes its connection with a linger (bot/slack/linger.py),
so that a client still sending reads the answer rather than a reset.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from slack_bolt.adapter.starlette.async_handler import to_starlette_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

log = logging.getLogger(__name__)

# Slack's payloads are a few KiB (a slash command, a button click, an event); 1 MiB leaves room
# for the largest (a modal's state) and bounds what a stranger can make the bot hold.
MAX_BODY_BYTES = 1 << 20
MAX_AGE_S = 5 * 60  # Slack's replay window, as Bolt's own check has it
_BOLT_VERIFIER_LOGGER = "slack_bolt.AsyncRequestVerification"


class ServedBot(Protocol):
    """What HTTP mode needs of a bot (bot.slack.app's SpecbenchBot): its Bolt app and signing
    secret, and its start and stop for the server's lifespan. A protocol, so that this module
    never imports the bot that imports it."""

    app: AsyncApp
    signing_secret: str | None

    async def startup(self) -> None: ...

    async def shutdown(self) -> None: ...


class BodyTooLarge(Exception):
    """The request's body passed `MAX_BODY_BYTES`."""


class _NoBodyInLogs(logging.Filter):
    """Bolt's invalid-signature line quotes the whole request body: log that it happened."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "body:" in str(record.msg):
            record.msg, record.args = "Invalid request signature detected (body not logged)", ()
        return True


async def read_body(request: Request, *, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body; BodyTooLarge, reading no further, once it passes `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def is_signed(secret: str, *, body: bytes, headers: Any) -> bool:
    """Slack's signature (v0, HMAC-SHA256 over `v0:TIMESTAMP:BODY`) over the raw bytes, with a
    numeric timestamp of the last 5 minutes. Whatever the headers hold, False, never an error."""
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    # 12 digits is year 33658: a longer number cannot be fresh (and 400 digits overflow a float)
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12 or not signature:
        return False
    if abs(time.time() - int(timestamp)) > MAX_AGE_S:
        return False
    mac = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
    # bytes, not str: compare_digest refuses a str with non-ASCII characters
    return hmac.compare_digest(f"v0={mac.hexdigest()}".encode(), signature.encode("latin-1"))


def to_bolt_request(request: Request, body: bytes) -> AsyncBoltRequest | None:
    """Bolt's request, or None when the body is not UTF-8 or not a form or JSON object."""
    query: Any = request.query_params
    headers: Any = request.headers
    try:
        bolt_request = AsyncBoltRequest(body=body.decode("utf-8"), query=query, headers=headers)
    except (ValueError, TypeError, AttributeError):  # UnicodeDecodeError, JSONDecodeError
        return None
    return bolt_request if isinstance(bolt_request.body, dict) else None


def asgi_app(bot: ServedBot) -> Starlette:
    """The ASGI app of one bot: POST /slack/events, GET /healthz."""
    secret = bot.signing_secret
    bolt_logger = logging.getLogger(_BOLT_VERIFIER_LOGGER)
    if not any(isinstance(f, _NoBodyInLogs) for f in bolt_logger.filters):
        bolt_logger.addFilter(_NoBodyInLogs())

    async def events(request: Request) -> Response:
        try:
            body = await read_body(request)
        except BodyTooLarge:
            log.warning("refused a request body over %d bytes (Content-Length %s)",
                        MAX_BODY_BYTES, request.headers.get("content-length", "not given")[:20])
            return PlainTextResponse("request body too large", status_code=413,
                                     headers={"Connection": "close"})
        if secret and not is_signed(secret, body=body, headers=request.headers):
            log.info("refused a request without a valid Slack signature (%d bytes)", len(body))
            return PlainTextResponse("invalid request", status_code=401)
        bolt_request = to_bolt_request(request, body)
        if bolt_request is None:
            log.warning("refused a signed request whose body does not parse (%d bytes)",
                        len(body))
            return PlainTextResponse("malformed request body", status_code=400)
        return to_starlette_response(await bot.app.async_dispatch(bolt_request))

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        await bot.startup()
        try:
            yield
        finally:
            await bot.shutdown()

    return Starlette(routes=[Route("/slack/events", events, methods=["POST"]),
                             Route("/healthz", healthz, methods=["GET"])],
                     lifespan=lifespan)


async def serve_http(bot: ServedBot, port: int, *, host: str = "0.0.0.0") -> None:
    import uvicorn

    from bot.slack.linger import LingeringH11Protocol

    config = uvicorn.Config(asgi_app(bot), host=host, port=port, log_level="warning",
                            lifespan="on", http=LingeringH11Protocol)
    await uvicorn.Server(config).serve()
