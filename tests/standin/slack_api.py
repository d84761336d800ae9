"""A loopback stand-in for Slack's Web API (and Socket Mode) that records every call.

A real aiohttp server on 127.0.0.1, in a thread of its own: `POST /api/METHOD` answers like Slack
for auth.test, chat.postMessage, chat.update, chat.postEphemeral, files.getUploadURLExternal,
files.completeUploadExternal and apps.connections.open (any other method: `{"ok": true}`);
`POST /upload/FILE` takes an upload's bytes; `GET /socket` is a Socket Mode websocket that says
hello and relays envelopes pushed with `send_envelope`, recording the acks. `rate_limit(n)`
answers the next n API calls with 429 and `Retry-After: 1`.

It keeps the messages it was given like a channel does (text, blocks, metadata, files shared by
files.completeUploadExternal into a thread), and conversations.replies (GET or POST) answers from
them. Failure injection: `fail(method, times, error)` answers the next `times` calls of `method`
(None: every call until `fail(method, 0)`) with `{"ok": false, "error": error}`, doing nothing;
`hold(predicate)` does what a matching call asks (the message is posted) but holds its answer
back until `release()`, so that a test can kill its caller while it waits.

Scopes, as Slack checks them: a bot token (`xoxb-`) holds the bot scopes of the shipped
`config/slack-manifest.yml` (or `scopes=` given), and a method it lacks the scope for answers
`{"ok": false, "error": "missing_scope", "needed": ..., "provided": ...}`, doing nothing, with
the token's scopes in `X-OAuth-Scopes` on every answer. conversations.replies needs the history
scope of the channel's kind: `channels:history` for a public channel, `groups:history` for a
private one (an ID starting with G, or one named in `private=`), `im:history` for a DM (D).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import yaml
from aiohttp import WSMsgType, web

MANIFEST = Path(__file__).resolve().parents[2] / "config" / "slack-manifest.yml"
# The bot scope each method needs (Slack's method reference); a method not named needs none here
# (auth.test), or is not a bot token's (apps.connections.open takes the app-level token).
NEEDS = {"chat.postMessage": "chat:write", "chat.update": "chat:write",
         "chat.postEphemeral": "chat:write", "chat.delete": "chat:write",
         "files.getUploadURLExternal": "files:write",
         "files.completeUploadExternal": "files:write"}
HISTORY = ("conversations.replies", "conversations.history")


def shipped_scopes() -> frozenset[str]:
    """The bot scopes the shipped manifest asks for: what a token of the installed app holds."""
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return frozenset(manifest["oauth_config"]["scopes"]["bot"])


@dataclass
class Call:
    method: str  # "chat.postMessage", ..., "upload" for an upload URL's POST
    body: dict[str, Any]
    raw: bytes
    status: int
    answer: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


class SlackStandin:
    def __init__(self, *, scopes: frozenset[str] | None = None,
                 private: frozenset[str] = frozenset()) -> None:
        self.scopes = shipped_scopes() if scopes is None else frozenset(scopes)
        self.private = private  # channel IDs of private channels (besides G...)
        self.calls: list[Call] = []
        self.acks: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ts = 1_700_000_000
        self._files = 0
        self._limited = 0
        self._failing: dict[str, tuple[int | None, str]] = {}  # method -> (times left, error)
        self._hold: Any = None  # predicate(method, body) -> bool
        self._released: asyncio.Event | None = None
        self.messages: dict[str, dict[str, Any]] = {}  # ts -> the message as Slack keeps it
        self._names: dict[str, str] = {}  # file ID -> its filename
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="slack-standin", daemon=True)
        self.port = 0

    # --- control ---

    def start(self) -> SlackStandin:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the Slack stand-in did not start")
        return self

    def stop(self) -> None:
        self.release()  # a held answer would keep the server from closing
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def rate_limit(self, n: int) -> None:
        with self._lock:
            self._limited = n

    def fail(self, method: str, times: int | None = 1, error: str = "internal_error") -> None:
        """Answer the next `times` calls of `method` (None: all, until times=0) with ok:false."""
        with self._lock:
            if times == 0:
                self._failing.pop(method, None)
            else:
                self._failing[method] = (times, error)

    def hold(self, predicate: Any) -> None:
        """Hold back the answer to calls for which `predicate(method, body)` is true."""
        assert self._loop is not None
        self._released = asyncio.Event()
        self._hold = predicate

    def release(self) -> None:
        self._hold = None
        if self._loop is not None and self._released is not None:
            self._loop.call_soon_threadsafe(self._released.set)

    def recorded(self, method: str | None = None, *, status: int | None = 200) -> list[Call]:
        with self._lock:
            calls = list(self.calls)
        return [c for c in calls if (method is None or c.method == method)
                and (status is None or c.status == status)]

    def wait_for(self, predicate: Any, timeout: float = 60.0) -> list[Call]:
        """Wait until `predicate(calls)` is true; returns the calls. The timeout only stops a
        test that would hang: what a test holds is the calls, never how soon they came."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.recorded(status=None)
            if predicate(calls):
                return calls
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; calls: {[c.method for c in calls]}")
            time.sleep(0.02)

    def send_envelope(self, envelope: dict[str, Any]) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._send(envelope), self._loop).result(5)

    def socket_count(self) -> int:
        return len(self._sockets)

    # --- server ---

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/upload/{file}", self._upload)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _body(self, request: web.Request) -> tuple[dict[str, Any], bytes]:
        raw = await request.read()
        kind = request.content_type
        if kind == "application/json":
            return json.loads(raw or b"{}"), raw
        if kind == "multipart/form-data":
            form = await request.post()
            return {k: str(v) for k, v in form.items()}, raw
        return dict(parse_qsl(raw.decode())), raw

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body, raw = await self._body(request)
        body.update(dict(request.query))
        with self._lock:
            limited = self._limited > 0
            if limited:
                self._limited -= 1
        if limited:
            answer = {"ok": False, "error": "ratelimited"}
            with self._lock:
                self.calls.append(Call(method, body, raw, 429, answer))
            return web.json_response(answer, status=429, headers={"Retry-After": "1"})
        with self._lock:
            failing = self._failing.get(method)
            if failing is not None:
                times, error = failing
                if times is not None and times <= 1:
                    self._failing.pop(method)
                elif times is not None:
                    self._failing[method] = (times - 1, error)
        if failing is not None:
            answer = {"ok": False, "error": failing[1]}
            with self._lock:
                self.calls.append(Call(method, body, raw, 200, answer))
            return web.json_response(answer)
        headers = {"X-OAuth-Scopes": ",".join(sorted(self.scopes))}
        needed = self._needed(method, body, request)
        answer = (self._answer(method, body, request) if needed is None else
                  {"ok": False, "error": "missing_scope", "needed": needed,
                   "provided": ",".join(sorted(self.scopes))})
        with self._lock:
            self.calls.append(Call(method, body, raw, 200, answer))
        held = self._hold
        if held is not None and held(method, body) and self._released is not None:
            await self._released.wait()
        return web.json_response(answer, headers=headers)

    def _needed(self, method: str, body: dict[str, Any], request: web.Request) -> str | None:
        """The scope a bot token lacks for this call (None: it may make it)."""
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not (token or str(body.get("token") or "")).startswith("xoxb-"):
            return None
        needed = NEEDS.get(method)
        if method in HISTORY:
            channel = str(body.get("channel") or "")
            needed = ("im:history" if channel.startswith("D") else "groups:history"
                      if channel.startswith("G") or channel in self.private
                      else "channels:history")
        return None if needed is None or needed in self.scopes else needed

    def _answer(self, method: str, body: dict[str, Any], request: web.Request) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://standin.slack.com/", "team": "Stand-in",
                    "user": "specbench", "team_id": "T0001", "user_id": "UBOT", "bot_id": "BBOT"}
        if method in ("chat.postMessage", "chat.update"):
            ts = body.get("ts") or self._next_ts()
            self._keep(method, ts, body)
            return {"ok": True, "channel": body.get("channel"), "ts": ts,
                    "message": {"text": body.get("text"), "ts": ts}}
        if method == "conversations.replies":
            return self._replies(body)
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "files.getUploadURLExternal":
            with self._lock:
                self._files += 1
                file_id = f"F{self._files:05d}"
                self._names[file_id] = str(body.get("filename"))
            return {"ok": True, "file_id": file_id,
                    "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}"}
        if method == "files.completeUploadExternal":
            files = json.loads(body.get("files") or "[]")
            if body.get("thread_ts"):  # shared into the thread: a reply carrying the files
                ts = self._next_ts()
                with self._lock:
                    self.messages[ts] = {
                        "ts": ts, "channel": body.get("channel_id"),
                        "thread_ts": body["thread_ts"],
                        "files": [{"id": f.get("id"), "name": self._names.get(f.get("id")),
                                   "title": f.get("title")} for f in files]}
            return {"ok": True, "files": [{"id": f.get("id"), "title": f.get("title")}
                                          for f in files]}
        if method == "apps.connections.open":
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket"}
        return {"ok": True}

    def _keep(self, method: str, ts: str, body: dict[str, Any]) -> None:
        metadata = body.get("metadata")
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        with self._lock:
            if method == "chat.update":
                if ts in self.messages:
                    self.messages[ts].update(text=body.get("text"), blocks=body.get("blocks"))
                return
            self.messages[ts] = {"ts": ts, "channel": body.get("channel"),
                                 "thread_ts": body.get("thread_ts"), "text": body.get("text"),
                                 "blocks": body.get("blocks"), "metadata": metadata}

    def _replies(self, body: dict[str, Any]) -> dict[str, Any]:
        """conversations.replies: the parent and its thread, metadata only when asked for."""
        root, channel = body.get("ts"), body.get("channel")
        with_metadata = str(body.get("include_all_metadata")).lower() in ("1", "true")
        with self._lock:
            found = [dict(m) for m in self.messages.values() if m.get("channel") == channel
                     and root in (m["ts"], m.get("thread_ts"))]
        if not found:
            return {"ok": False, "error": "thread_not_found"}
        for message in found:
            if not with_metadata or message.get("metadata") is None:
                message.pop("metadata", None)
        found.sort(key=lambda m: float(m["ts"]))
        return {"ok": True, "messages": found, "has_more": False}

    def _next_ts(self) -> str:
        with self._lock:
            self._ts += 1
            return f"{self._ts}.000100"

    async def _upload(self, request: web.Request) -> web.Response:
        raw = await request.read()
        with self._lock:
            self.calls.append(Call("upload", {"file": request.match_info["file"]}, raw, 200))
        return web.Response(text=f"OK - {len(raw)}")

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    with self._lock:
                        self.acks.append(json.loads(message.data))
        finally:
            self._sockets.remove(socket)
        return socket

    async def _send(self, envelope: dict[str, Any]) -> None:
        for socket in list(self._sockets):
            await socket.send_str(json.dumps(envelope))
