"""The bot's HTTP mode (`specbench bot --http PORT`): its Bolt app behind Starlette, served by
uvicorn. POST /slack/events takes Slack's signed requests; GET /healthz answers `ok` (what
`python -m jobs.ops.health bot --http PORT` asks). The app's lifespan starts and stops the bot.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from bot.slack.app import SpecbenchBot


def asgi_app(bot: SpecbenchBot) -> Starlette:
    """The ASGI app of one bot: POST /slack/events, GET /healthz."""
    handler = AsyncSlackRequestHandler(bot.app)

    async def events(request: Request) -> Response:
        response: Response = await handler.handle(request)
        return response

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


async def serve_http(bot: SpecbenchBot, port: int, *, host: str = "0.0.0.0") -> None:
    import uvicorn

    config = uvicorn.Config(asgi_app(bot), host=host, port=port, log_level="warning",
                            lifespan="on")
    await uvicorn.Server(config).serve()
