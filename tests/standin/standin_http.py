"""The stand-ins' HTTP client and thread pool: a request over a plain socket, read until the
server closes it, and `run_all`, ThreadPoolExecutor.map's order without its imports.

A stand-in benchmark is a process per run, started hundreds of times by the suite: urllib.request
(or http.client with the email parser) and concurrent.futures (with logging) took more of its
CPU than everything it does (72 ms a run, 35 of them in those imports). The stand-in servers
speak HTTP/1.1 with a Content-Length or chunked body; every request here asks them to close the
connection after the answer.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


class HTTPStatusError(OSError):
    """An answer of status 400 or above (urllib's HTTPError is an OSError too)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP Error {status}: {reason}")
        self.status, self.reason = status, reason


class Response:
    """The status line and headers read; the body read on demand from the open socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")
        version, status, *reason = self._file.readline().decode("latin-1").split(" ", 2)
        if not version.startswith("HTTP/"):
            raise OSError(f"not an HTTP answer: {version!r}")
        self.status, self.reason = int(status), " ".join(reason).strip()
        self.headers: dict[str, str] = {}
        while (line := self._file.readline().decode("latin-1").strip()):
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives: chunk by chunk when chunked, else whole."""
        try:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                while (size := int(self._file.readline().split(b";")[0] or b"0", 16)):
                    yield self._file.read(size)
                    self._file.readline()  # the CRLF after each chunk
            elif "content-length" in self.headers:
                yield self._file.read(int(self.headers["content-length"]))
            else:
                yield self._file.read()
        finally:
            self.close()

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def lines(self) -> Iterator[bytes]:
        """The body line by line (a server-sent event stream's)."""
        rest = b""
        for chunk in self.chunks():
            rest += chunk
            *whole, rest = rest.split(b"\n")
            yield from (line + b"\n" for line in whole)
        if rest:
            yield rest

    def close(self) -> None:
        self._file.close()
        self._sock.close()


def open_url(url: str, body: Any = None, *, method: str | None = None,
             timeout: float = 30.0) -> Response:
    """`METHOD url` (POST with a JSON body when `body` is given, else GET): the answer, whatever
    its status."""
    if not url.startswith("http://"):
        raise ValueError(f"unknown url type: {url!r}")
    where, _, path = url[len("http://"):].partition("/")
    host, _, port = where.rpartition(":") if ":" in where else (where, "", "80")
    data = json.dumps(body).encode() if body is not None else b""
    head = [f"{method or ('POST' if body is not None else 'GET')} /{path} HTTP/1.1",
            f"Host: {where}", "Connection: close", "Accept: */*"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        return Response(sock)
    except BaseException:
        sock.close()
        raise


def call(url: str, body: Any = None, *, timeout: float = 30.0) -> bytes:
    """The body of a 2xx answer to `url`; HTTPStatusError for any other status."""
    response = open_url(url, body, timeout=timeout)
    if response.status >= 400:
        response.close()
        raise HTTPStatusError(response.status, response.reason)
    return response.read()


def run_all(work: Callable[[int], T], count: int, workers: int) -> list[T]:
    """[work(0), ..., work(count - 1)], at most `workers` running at once; the first error
    raised is raised again once all have ended (ThreadPoolExecutor.map's, in order)."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    lock, taken = threading.Lock(), iter(range(count))

    def loop() -> None:
        while True:
            with lock:
                index = next(taken, None)
            if index is None:
                return
            try:
                results[index] = work(index)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                errors.append(exc)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(max(1, min(workers,
                                                                                 count)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
