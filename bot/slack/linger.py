"""Lingering close for the bot's HTTP server, as web servers do it (nginx's `lingering_close`).

When the bot answers before it has read a request's body (a 413 for a body over the cap, sent
on its Content-Length before a byte of it is read) and then closes the socket, the kernel
answers the bytes still arriving with a reset, and a client still sending (one that writes its
whole body before it reads, as most do) sees "connection reset" instead of the 413. So the
close of such a connection is a lingering one: the answer is flushed and the write side shut
(`shutdown(SHUT_WR)`, the client reads the answer and then end of file), and what the client
still sends is read and thrown away, counted, never held, until the client closes its side, or
`LINGER_BYTES` more arrived, or `LINGER_SECONDS` passed: a client that sends for ever is cut.
A connection whose request was read in full closes at once, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

LINGER_SECONDS = 10.0  # a 20 MB body at 20 Mbit/s; a client that sends longer is cut
LINGER_BYTES = 64 << 20  # read and thrown away at most; then the connection is cut


class _LingeringTransport:
    """The connection's transport as the protocol sees it: all of it, but `close()` lingers
    while the request's body is unread."""

    def __init__(self, transport: asyncio.Transport, protocol: LingeringH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.lingering = False
        self.discarded = 0
        self._timer: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        real = self._transport
        body_unread = self._protocol.conn.their_state is h11.SEND_BODY
        if self.lingering or real.is_closing() or not body_unread or not real.can_write_eof():
            self._cut()
            return
        try:
            real.write_eof()  # after the answer is flushed: the client reads it, then end of file
        except OSError:  # the client has gone already: nothing to linger for
            self._cut()
            return
        self.lingering = True
        real.resume_reading()  # the protocol may have paused it with a body half read
        self._timer = asyncio.get_running_loop().call_later(LINGER_SECONDS, self._cut)

    def discard(self, data: bytes) -> None:
        """Bytes that arrived while lingering: counted and dropped."""
        self.discarded += len(data)
        if self.discarded > LINGER_BYTES:
            self._cut()

    def _cut(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport.close()


class LingeringH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose connections close with a linger (module doc)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_LingeringTransport(transport, self))  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if isinstance(transport, _LingeringTransport) and transport.lingering:
            transport.discard(data)
            return
        super().data_received(data)
