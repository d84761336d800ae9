"""The stand-in servers' HTTP: the part of http.server's BaseHTTPRequestHandler and
ThreadingHTTPServer they use, over socketserver alone.

A stand-in server is a process per configuration, started hundreds of times by the suite;
http.server's imports (http.client, the email package, html, mimetypes) were a third of each
start's CPU. What a handler sees is http.server's: `do_GET`/`do_POST`, `path`, `headers.get`
(any case), `rfile`, `wfile`, `requestline`, `client_address`, `send_response` (which logs
through `log_message(format, requestline, code, size)`), `send_header`, `end_headers`, and
HTTP/1.1 connections kept open unless the client or a `Connection: close` header ends them.
"""

from __future__ import annotations

import socketserver
import sys
import time

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable"}
_MAX_LINE = 65536


class Headers(dict[str, str]):
    """A request's headers; `get` by any case of the name, as email.message.Message's."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


class RequestHandler(socketserver.StreamRequestHandler):
    """One connection: request after request while it is kept alive."""

    protocol_version = "HTTP/1.0"
    server_version = "BaseHTTP/0.6"
    close_connection = True

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.handle_one_request()

    def handle_one_request(self) -> None:
        try:
            line = self.rfile.readline(_MAX_LINE + 1)
        except OSError:
            line = b""
        if not line or len(line) > _MAX_LINE:
            self.close_connection = True
            return
        self.requestline = line.decode("iso-8859-1").rstrip("\r\n")
        self.command, self.path, self.request_version = "", "", "HTTP/0.9"
        words = self.requestline.split()
        self.headers = Headers()
        while (raw := self.rfile.readline(_MAX_LINE + 1)) not in (b"\r\n", b"\n", b""):
            name, _, value = raw.decode("iso-8859-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            self.close_connection = True
            self._error(400)
            return
        self.command, self.path, self.request_version = words
        modern = self.protocol_version >= "HTTP/1.1"
        connection = self.headers.get("Connection", "").lower()
        self.close_connection = connection == "close" or not modern or (
            self.request_version < "HTTP/1.1" and connection != "keep-alive")
        method = getattr(self, "do_" + self.command, None)
        if method is None:
            self._error(501)
            return
        method()
        self.wfile.flush()

    def _error(self, code: int) -> None:
        body = f"Error code: {code}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.log_message('"%s" %s %s', self.requestline, str(code), "-")
        self._buffer = [f"{self.protocol_version} {code} {message or REASONS.get(code, '')}\r\n"]
        self.send_header("Server", f"{self.server_version} Python/{sys.version.split()[0]}")
        self.send_header("Date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()))

    def send_header(self, keyword: str, value: str) -> None:
        self._buffer.append(f"{keyword}: {value}\r\n")
        if keyword.lower() == "connection":
            self.close_connection = value.lower() == "close" or (
                value.lower() != "keep-alive" and self.close_connection)

    def end_headers(self) -> None:
        self._buffer.append("\r\n")
        self.wfile.write("".join(self._buffer).encode("latin-1", "strict"))
        self._buffer = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        sys.stderr.write(f"{self.client_address[0]} - - {format % args}\n")


class ThreadingHTTPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A thread per connection, the address reusable at once (http.server's)."""

    allow_reuse_address = True
    daemon_threads = True

    def server_bind(self) -> None:
        super().server_bind()
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]
