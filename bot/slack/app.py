"""The Slack bot: a Bolt `AsyncApp` over Socket Mode (default) or HTTP (bot.slack.http).

Every handler acks first, then hands the work to a background task: the router answers, a run
opens its thread (bot.thread). The Web API client is bot.slack.client's: on SLACK_API_URL, it
waits out rate limits. A retried or replayed delivery does nothing twice: a key already seen by
this process (a command's trigger_id, an event's event_id) is dropped at once, whether or not
Slack's retry headers say so, so that a `digest` or any other answer is posted once; the store
keeps each answer's parts (bot.slack.replies), so a replay after a restart is dropped too; a
`run`'s key also reaches `Dispatcher.submit`, whose store keeps it across restarts. A launch button
(Retry, Re-run anyway) is keyed by the button, not the click: a double click starts one batch
(the keys are bot.slack.deliveries'). A watch alert's buttons (Acknowledge, Not a regression) act
once: the change's acknowledgement is one row in the store, and a second click is answered with
the first one's user and time. A `watch PRESET` answer is posted in the channel, and its thread
becomes the watch's.

In distributed mode the threads read events through the Redis consumer group
(bot.thread.durable_feed), so a restarted bot resumes where its predecessor stopped. The process
logs through jobs.ops.logs and keeps the `bot` heartbeat of jobs.ops.health (Socket Mode: only
while connected).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.chat.router import Access, Caller, Router
from bot.slack.client import SlackPoster, make_client
from bot.slack.deliveries import (
    button_value,
    idempotency_key,
    is_redelivery,
    to_click,
    to_launch,
)
from bot.slack.replies import answer, is_answered, request_ledger
from bot.thread.messages import Feed, Message
from bot.thread.store_retry import off_loop
from bot.thread.summary_message import logs_message
from bot.thread.thread_hub import ThreadHub
from jobs.batches.dispatch import Dispatcher
from jobs.engines.base import Engine
from jobs.errors import InfraError

log = logging.getLogger(__name__)
SEEN_KEYS = 10_000
AUTH_WARMUP_S = 3.0

__all__ = ["SpecbenchBot", "idempotency_key", "run_bot"]  # the key: re-exported for callers


class SpecbenchBot:
    """The Bolt app, the router and the threads of one bot process."""

    def __init__(
        self, dispatcher: Dispatcher, *, token: str | None, signing_secret: str | None,
        api_url: str | None = None, access: Access | None = None, interval: float = 2.0,
        engine_for: Callable[[str], Engine] | None = None, feed: Feed | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.signing_secret = signing_secret
        self.client = make_client(token, api_url=api_url)
        # Listeners only ack and spawn a task, so running them inline answers Slack fastest
        # (Bolt's other mode polls for the ack every 10 ms).
        self.app = AsyncApp(client=self.client, signing_secret=signing_secret,
                            process_before_response=True)
        self.router = Router(dispatcher, access or Access.from_env(), engine_for)
        self.poster = SlackPoster(self.client)
        self.hub = ThreadHub(dispatcher, self.poster, interval=interval, feed=feed)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        # A few threads for the router's blocking work: more would only fight the event loop
        # (which acks) for the GIL.
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="specbench-router")
        self._register()

    def _register(self) -> None:
        app = self.app

        @app.command("/specbench")
        async def on_command(ack: Any, body: dict[str, Any], request: AsyncBoltRequest) -> None:
            await ack()
            key = idempotency_key(body.get("team_id"), body.get("user_id"), body.get("command"),
                                  body.get("text"), body.get("trigger_id"))
            self.spawn(self.handle(line=body.get("text", ""), user=body["user_id"],
                                   channel=body["channel_id"], key=key,
                                   retried=is_redelivery(request, body.get("trigger_id"))))

        @app.event("app_mention")
        async def on_mention(ack: Any, body: dict[str, Any], request: AsyncBoltRequest) -> None:
            await ack()
            event = body["event"]
            line = " ".join(w for w in event.get("text", "").split() if not w.startswith("<@"))
            self.spawn(self.handle(line=line, user=event["user"], channel=event["channel"],
                                   key=idempotency_key(body.get("event_id")),
                                   retried=is_redelivery(request, body.get("event_id"))))

        @app.action("specbench_cancel")
        async def on_cancel(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            self.spawn(self.handle(line=f"cancel {button_value(body)}", **to_click(body)))

        @app.action("specbench_retry")
        async def on_retry(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            self.spawn(self.handle(line=f"retry {button_value(body)}", **to_launch(body)))

        @app.action("specbench_rerun_known")
        async def on_rerun_known(ack: Any, body: dict[str, Any]) -> None:
            await ack()  # the value is "BATCH APPROACH": that known dead end, started anyway
            self.spawn(self.handle(line=f"retry {button_value(body)} --rerun-known",
                                   **to_launch(body)))

        @app.action("specbench_watch_ack")
        async def on_watch_ack(ack: Any, body: dict[str, Any]) -> None:
            await ack()  # once: the change's acknowledgement is one row; a second click is told
            self.spawn(self.handle(line=f"watch ack {button_value(body)}", **to_click(body)))

        @app.action("specbench_watch_dismiss")
        async def on_watch_dismiss(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            self.spawn(self.handle(line=f"watch dismiss {button_value(body)}",
                                   **to_click(body)))

        @app.action("specbench_logs")
        async def on_logs(ack: Any, body: dict[str, Any]) -> None:
            await ack()
            self.spawn(self.show_logs(batch_id=button_value(body), **to_click(body)))

    def spawn(self, work: Awaitable[None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception:
                log.exception("a Slack request's background work failed")

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def handle(
        self, *, line: str, user: str, channel: str, key: str | None, retried: bool = False,
        thread_ts: str | None = None, button: bool = False,
    ) -> None:
        """Route one line and answer it; a run opens its thread. `retried`: a delivery whose
        `key` this process has seen is a retry or a replay (the key holds a unique ID, or Slack's
        retry header said so), and is dropped."""
        if key is not None:
            if key in self._seen and retried:
                return
            self._seen[key] = None
            while len(self._seen) > SEEN_KEYS:
                self._seen.popitem(last=False)
        # a replay its predecessor answered is dropped too (bot.slack.replies)
        ledger = await request_ledger(self.dispatcher.store, key, retried=retried)
        if is_answered(ledger):
            return
        route = functools.partial(self.router.handle, line,
                                  caller=Caller(user=user, channel=channel), idempotency_key=key)
        reply = await asyncio.get_running_loop().run_in_executor(self._executor, route)
        if reply.started is not None:
            if reply.started.created:
                self.hub.open(reply.started, channel=channel)
            elif button:  # a second click on a launch button: say which batch it started
                await self.poster.ephemeral(channel=channel, user=user, thread_ts=thread_ts,
                                            message=Message(text=reply.text))
            return
        ts = await answer(self.poster, ledger, reply=reply, channel=channel, user=user,
                          thread_ts=thread_ts, button=button)
        if reply.watch is not None and ts is not None:  # the reply's thread is the watch's
            store, watch_id = self.dispatcher.store, reply.watch
            await off_loop(functools.partial(store.set_watch_thread, watch_id, channel,
                                             thread_ts or ts))

    async def show_logs(self, *, batch_id: str, user: str, channel: str, thread_ts: str | None,
                        **_: Any) -> None:
        refusal = self.router.access.refusal(Caller(user=user, channel=channel), "show")
        if refusal is not None:  # the logs name hosts and models: the allow-lists bind them
            message = Message(text=f"Sorry: refused: {refusal}")
        else:
            message = await off_loop(functools.partial(
                logs_message, store=self.dispatcher.store, batch_id=batch_id))
        await self.poster.ephemeral(channel=channel, user=user, message=message,
                                    thread_ts=thread_ts)

    async def startup(self, *, is_alive: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Follow events, catch up on threads a previous bot left unfinished, and keep the
        `bot` heartbeat (jobs.ops.health) while `is_alive()` says so (Socket Mode: connected)."""
        self.hub.start()
        self._heartbeat = asyncio.get_running_loop().create_task(
            self._keep_heartbeat(is_alive), name="heartbeat-bot")
        try:
            await asyncio.wait_for(self._warm_authorization(), timeout=AUTH_WARMUP_S)
        except Exception:  # noqa: BLE001 - Bolt makes the call itself on the first request
            log.warning("auth.test at start-up failed; the first request will retry it",
                        exc_info=True)
        self.spawn(self._catch_up())  # in the background: a database away must not hold acks

    async def _catch_up(self) -> None:
        resumed = await self.hub.catch_up()
        if resumed:
            log.info("resumed the threads of %s", ", ".join(resumed))

    async def _warm_authorization(self) -> None:
        """Bolt calls auth.test before answering the first request, then caches it: make
        that call now, so that the first command after a start is acked as fast as the rest."""
        from slack_bolt.middleware.authorization.async_single_team_authorization import (
            AsyncSingleTeamAuthorization,
        )

        for middleware in getattr(self.app, "_async_middleware_list", []):
            if (isinstance(middleware, AsyncSingleTeamAuthorization)
                    and middleware.auth_test_result is None):
                middleware.auth_test_result = await self.client.auth_test()

    async def _keep_heartbeat(self, is_alive: Callable[[], Awaitable[bool]] | None) -> None:
        from jobs.ops import health

        while True:
            touched = False
            try:
                if is_alive is None or await is_alive():
                    health.touch_heartbeat("bot")
                    touched = True
            except Exception:  # noqa: BLE001 - a missed beat must not stop the bot
                log.debug("heartbeat failed", exc_info=True)
            # not connected (yet): look again soon, so that the first beat follows the connection
            await asyncio.sleep(health.HEARTBEAT_INTERVAL_S if touched else 1.0)

    async def shutdown(self) -> None:
        if self._heartbeat is not None:
            from jobs.ops import health

            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            health.heartbeat_path("bot").unlink(missing_ok=True)
        await self.hub.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def serve_socket_mode(self, app_token: str) -> None:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(self.app, app_token)
        await self.startup(is_alive=handler.client.is_connected)
        try:
            await handler.start_async()  # type: ignore[no-untyped-call]
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            await self.shutdown()


def run_bot(*, http_port: int | None) -> int:
    """`specbench bot`: Socket Mode unless `--http PORT`."""
    from jobs.dispatchers import get_dispatcher

    token = os.environ.get("SLACK_BOT_TOKEN")
    if not token:
        raise InfraError("SLACK_BOT_TOKEN is not set")
    secret = os.environ.get("SLACK_SIGNING_SECRET")
    app_token = os.environ.get("SLACK_APP_TOKEN")
    if http_port is not None and not secret:
        raise InfraError("HTTP mode needs SLACK_SIGNING_SECRET")
    if http_port is None and not app_token:
        raise InfraError("Socket Mode needs SLACK_APP_TOKEN (or run with --http PORT)")
    from bot.thread.durable_feed import open_feed
    from jobs.ops.logs import configure_logging, log_start

    configure_logging()
    log_start("bot", transport="http" if http_port is not None else "socket-mode",
              port=http_port)
    dispatcher = get_dispatcher()
    try:
        bot = SpecbenchBot(dispatcher, token=token, signing_secret=secret,
                           feed=open_feed(dispatcher))
        if http_port is not None:
            from bot.slack.http import serve_http

            asyncio.run(serve_http(bot, http_port))
        else:
            assert app_token is not None
            asyncio.run(bot.serve_socket_mode(app_token))
    finally:
        dispatcher.close()
    return 0
