"""A TCP proxy a test owns, to make a real service (PostgreSQL, Redis) unreachable for a while.

    with TcpProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/postgres"
        ...
        proxy.cut()       # every open connection is reset; new ones are refused
        time.sleep(6)
        proxy.restore()   # new connections go through again

`cut()` closes the listening socket too, so a client sees "connection refused", as it would
during a restart of the service; `restore()` listens again on the same port. `hang()` is a
service that froze: connections are still accepted, but nothing is forwarded either way, on new
connections or open ones, until `restore()` lets what was held through.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._closed = False
        self._flowing = threading.Event()
        self._flowing.set()
        self.port = port
        self._listen()

    def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True,
                         name=f"proxy-{self.port}").start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut() or close()
            with self._lock:
                self._conns.add(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # hung: accepted, never answered
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            self._drop(client)
            return
        upstream.settimeout(None)
        with self._lock:
            self._conns.add(upstream)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()  # hung: held until restore()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def cut(self) -> None:
        """The service goes away: listening stops, every open connection is reset."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):  # RST, not FIN: the peer sees a reset
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._drop(sock)

    def hang(self) -> None:
        """The service freezes: it accepts connections and answers nothing on any of them."""
        self._flowing.clear()

    def restore(self) -> None:
        """The service is back on the same port (and what a hang held goes through)."""
        if self._listener is None and not self._closed:
            self._listen()
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._flowing.set()  # held pumps wake up to find their sockets closed

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
